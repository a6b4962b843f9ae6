// Profile stability and fidelity: profiles one model twice and reports how much the two
// profiles differ per layer and in total, and how the profile's sum of per-layer
// forward+backward times compares with timing the whole model (forward, loss, backward).
//   profile_stability_bench [--model gpt] [--opt k=v,k=v] [--batch 8] [--warmup 2]
//       [--repeat 5] [--threads 1] [--seed 1]
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "bench_flags.h"
#include "dapple/common/error.h"
#include "dapple/cpu/blas_env.h"
#include "dapple/models/data.h"
#include "dapple/models/model.h"
#include "dapple/models/zoo.h"
#include "dapple/profiler/profiler.h"

using namespace dapple;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Median wall time of forward + loss + backward of the whole model, in ms.
double WholeModelMs(const Model& m, int batch, int warmup, int repeat, uint64_t seed) {
  Batch b = MakeDataset("synthetic", m, seed, "")->GlobalBatch(0, batch);
  std::vector<double> ms;
  for (int r = 0; r < warmup + repeat; ++r) {
    auto a = std::chrono::steady_clock::now();
    m.loss(m.Forward(b.inputs), b.targets).backward();
    auto z = std::chrono::steady_clock::now();
    if (r >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(z - a).count());
  }
  return Median(ms);
}

int main(int argc, char** argv) try {
  auto f = bench::ParseFlags(argc, argv);
  int threads = SetComputeThreads(std::stoi(bench::Flag(f, "threads", "1")));
  std::string name = bench::Flag(f, "model", "gpt");
  std::vector<std::string> words;
  std::stringstream opts(bench::Flag(f, "opt", ""));
  for (std::string w; std::getline(opts, w, ',');) words.push_back(w);
  ModelOptions options = ParseModelFlags(words);
  ProfilerOptions po;
  po.batch_size = std::stoi(bench::Flag(f, "batch", "8"));
  po.warmup = std::stoi(bench::Flag(f, "warmup", "2"));
  po.repeat = std::stoi(bench::Flag(f, "repeat", "5"));
  po.seed = std::stoull(bench::Flag(f, "seed", "1"));
  po.progress = false;
  Model m = BuildModel(name, options, po.seed);
  std::printf(
      "%s, %lld parameters, batch %d, warmup %d, repeat %d, %d threads, "
      "BLAS %s\n",
      name.c_str(), static_cast<long long>(m.ParameterCount()), po.batch_size, po.warmup, po.repeat,
      threads, BlasName().c_str());
  Profile a = ProfileModel(m, po), b = ProfileModel(m, po);
  std::printf("%-12s %12s %12s %9s\n", "layer", "run1 f+b ms", "run2 f+b ms", "diff %");
  std::vector<double> diffs;
  double ta = 0, tb = 0;
  for (int i = 0; i < a.num_layers(); ++i) {
    double x = a.layers[i].forward_ms + a.layers[i].backward_ms;
    double y = b.layers[i].forward_ms + b.layers[i].backward_ms;
    ta += x, tb += y;
    double d = 100 * std::abs(x - y) / (0.5 * (x + y));
    diffs.push_back(d);
    std::printf("%-12s %12.3f %12.3f %9.1f\n", a.layers[i].id.c_str(), x, y, d);
  }
  std::printf("per-layer |diff|: median %.1f%%, max %.1f%%; total %.3f vs %.3f ms: %.1f%%\n",
              Median(diffs), *std::max_element(diffs.begin(), diffs.end()), ta, tb,
              100 * std::abs(ta - tb) / (0.5 * (ta + tb)));
  double whole = WholeModelMs(m, po.batch_size, po.warmup, po.repeat, po.seed);
  std::printf("whole model fwd+loss+bwd: %.3f ms; profile sum / whole = %.3f (run1), %.3f (run2)\n",
              whole, ta / whole, tb / whole);
  return 0;
} catch (const dapple::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 2;
}
