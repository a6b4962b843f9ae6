// Character-level language modelling on the King James Bible: trains a small GPT and
// prints the training loss curve (mean of every --every steps) and the held-out loss.
//   model_kjv_bench [--steps 300] [--batch 32] [--lr 3e-3] [--hidden 128] [--layers 2]
//       [--heads 4] [--seq 64] [--every 25] [--threads 1] [--seed 1] [--cache-dir DIR]
#include <torch/autograd.h>
#include <torch/optim/adam.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "bench_flags.h"
#include "dapple/common/error.h"
#include "dapple/cpu/blas_env.h"
#include "dapple/models/data.h"
#include "dapple/models/model.h"

using namespace dapple;

int main(int argc, char** argv) try {
  auto f = bench::ParseFlags(argc, argv);
  int threads = SetComputeThreads(std::stoi(bench::Flag(f, "threads", "1")));
  ModelOptions options{{"hidden", bench::Flag(f, "hidden", "128")},
                       {"layers", bench::Flag(f, "layers", "2")},
                       {"heads", bench::Flag(f, "heads", "4")},
                       {"seq", bench::Flag(f, "seq", "64")}};
  int steps = std::stoi(bench::Flag(f, "steps", "300"));
  int every = std::stoi(bench::Flag(f, "every", "25"));
  int64_t batch = std::stoll(bench::Flag(f, "batch", "32"));
  double lr = std::stod(bench::Flag(f, "lr", "3e-3"));
  uint64_t seed = std::stoull(bench::Flag(f, "seed", "1"));
  Model m = BuildModel("gpt", options, seed);
  auto data =
      MakeDataset("kjv", m, seed, bench::Flag(f, "cache-dir", DefaultDataCacheDir().string()));
  torch::optim::Adam opt(m.Parameters(0, m.num_layers() - 1), torch::optim::AdamOptions(lr));
  std::printf(
      "gpt (%lld parameters; hidden %s, layers %s, seq %s), batch %lld, Adam lr %g, "
      "%d threads, BLAS %s; uniform over 128 codes = %.3f nats\n",
      static_cast<long long>(m.ParameterCount()), options["hidden"].c_str(),
      options["layers"].c_str(), options["seq"].c_str(), static_cast<long long>(batch), lr, threads,
      BlasName().c_str(), std::log(128.0));
  auto start = std::chrono::steady_clock::now();
  double window = 0;
  for (int s = 0; s < steps; ++s) {
    Batch b = data->GlobalBatch(s, batch);
    opt.zero_grad();
    torch::Tensor loss = m.loss(m.Forward(b.inputs), b.targets);
    loss.backward();
    opt.step();
    window += loss.item<double>();
    if ((s + 1) % every == 0) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("step %4d: loss %.4f (%.1f s)\n", s + 1, window / every, secs);
      window = 0;
    }
  }
  torch::NoGradGuard no_grad;
  Batch test = data->TestSet();
  int64_t n = std::min<int64_t>(test.inputs.size(0), 512);
  Batch t = SliceBatch(test, 0, n);
  std::printf("held-out loss (%lld sequences): %.4f\n", static_cast<long long>(n),
              m.loss(m.Forward(t.inputs), t.targets).item<double>());
  return 0;
} catch (const dapple::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 2;
}
