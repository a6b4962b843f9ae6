// Single-process baseline on real data: trains a zoo classifier on Fashion-MNIST and
// prints the training loss and the test accuracy after every epoch (docs/models.md).
//   model_fashion_mnist_bench [--model mlp] [--preset fashion-mnist] [--epochs 2]
//       [--batch 64] [--lr 1e-3] [--threads 1] [--seed 1] [--cache-dir DIR]
#include <torch/autograd.h>
#include <torch/optim/adam.h>

#include <chrono>
#include <cstdio>

#include "bench_flags.h"
#include "dapple/common/error.h"
#include "dapple/cpu/blas_env.h"
#include "dapple/models/data.h"
#include "dapple/models/model.h"

using namespace dapple;

double Accuracy(const Model& m, const Batch& test) {
  torch::NoGradGuard no_grad;
  for (auto& l : m.layers) l.module->eval();
  int64_t correct = 0, n = test.inputs.size(0);
  for (int64_t i = 0; i < n; i += 1000) {
    Batch b = SliceBatch(test, i, std::min(n, i + 1000));
    correct += m.Forward(b.inputs).argmax(1).eq(b.targets).sum().item<int64_t>();
  }
  for (auto& l : m.layers) l.module->train();
  return double(correct) / n;
}

int main(int argc, char** argv) try {
  auto f = bench::ParseFlags(argc, argv);
  int threads = SetComputeThreads(std::stoi(bench::Flag(f, "threads", "1")));
  std::string name = bench::Flag(f, "model", "mlp");
  ModelOptions options;
  if (name == "mlp") options["preset"] = bench::Flag(f, "preset", "fashion-mnist");
  int epochs = std::stoi(bench::Flag(f, "epochs", "2"));
  int64_t batch = std::stoll(bench::Flag(f, "batch", "64"));
  double lr = std::stod(bench::Flag(f, "lr", "1e-3"));
  uint64_t seed = std::stoull(bench::Flag(f, "seed", "1"));
  Model m = BuildModel(name, options, seed);
  auto data = MakeDataset("fashion-mnist", m, seed,
                          bench::Flag(f, "cache-dir", DefaultDataCacheDir().string()));
  Batch test = data->TestSet();
  torch::optim::Adam opt(m.Parameters(0, m.num_layers() - 1), torch::optim::AdamOptions(lr));
  int64_t steps_per_epoch = data->size() / batch;
  std::printf("%s (%lld parameters), batch %lld, Adam lr %g, %d threads, BLAS %s\n", name.c_str(),
              static_cast<long long>(m.ParameterCount()), static_cast<long long>(batch), lr,
              threads, BlasName().c_str());
  auto start = std::chrono::steady_clock::now();
  for (int e = 0; e < epochs; ++e) {
    double loss_sum = 0;
    for (int64_t s = 0; s < steps_per_epoch; ++s) {
      Batch b = data->GlobalBatch(e * steps_per_epoch + s, batch);
      opt.zero_grad();
      torch::Tensor loss = m.loss(m.Forward(b.inputs), b.targets);
      loss.backward();
      opt.step();
      loss_sum += loss.item<double>();
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("epoch %d: train loss %.4f, test accuracy %.2f%% (%.1f s)\n", e + 1,
                loss_sum / steps_per_epoch, 100 * Accuracy(m, test), secs);
  }
  return 0;
} catch (const dapple::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 2;
}
