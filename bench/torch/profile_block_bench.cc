// Forward+backward of one transformer block (a GPT block, batch x seq x hidden) and one
// float32 GEMM, to compare OpenBLAS kernels: run it with OPENBLAS_CORETYPE unset, then with
// OPENBLAS_CORETYPE=SkylakeX / Haswell. It deliberately does not set the variable itself.
// Threads: DAPPLE_BENCH_THREADS (default 1).
#include <benchmark/benchmark.h>
#include <torch/autograd.h>

#include <cstdlib>

#include "dapple/cpu/blas_env.h"
#include "dapple/models/data.h"
#include "dapple/models/model.h"

namespace dapple {
namespace {

int Threads() {
  const char* t = std::getenv("DAPPLE_BENCH_THREADS");
  return SetComputeThreads(t ? std::atoi(t) : 1);
}

// Args: hidden, seq, batch.
void BM_TransformerBlock(benchmark::State& state) {
  int threads = Threads();
  int64_t hidden = state.range(0), seq = state.range(1), batch = state.range(2);
  Model m = BuildModel("gpt",
                       {{"hidden", std::to_string(hidden)},
                        {"heads", std::to_string(hidden / 64)},
                        {"layers", "1"},
                        {"seq", std::to_string(seq)}},
                       1);
  torch::Tensor x;
  {
    torch::NoGradGuard no_grad;
    x = m.Forward(MakeDataset("synthetic", m, 1, "")->GlobalBatch(0, batch).inputs, 0, 0);
  }
  x.requires_grad_(true);
  for (auto _ : state) {
    torch::Tensor y = m.Forward(x, 1, 1);
    torch::autograd::backward({y}, {torch::ones_like(y)});
  }
  state.SetLabel("OPENBLAS_CORETYPE=" + OpenBlasCoreType() + " (core " + OpenBlasCoreName() +
                 "), threads " + std::to_string(threads));
}
BENCHMARK(BM_TransformerBlock)
    ->Args({256, 128, 8})
    ->Args({512, 128, 8})
    ->Unit(benchmark::kMillisecond);

void BM_Gemm(benchmark::State& state) {
  Threads();
  int64_t n = state.range(0);
  torch::Tensor a = torch::randn({n, n}), b = torch::randn({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(torch::mm(a, b));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("OPENBLAS_CORETYPE=" + OpenBlasCoreType() + " (core " + OpenBlasCoreName() + ")");
}
BENCHMARK(BM_Gemm)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dapple

BENCHMARK_MAIN();
