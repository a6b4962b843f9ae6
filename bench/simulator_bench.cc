// Simulated instructions per second of the exact simulator: S = 64 stages,
// M = 512 micro-batches, 1 to 16 replicas per stage, with the fake cost model (free or
// contended transfers) and with the analytic cost model on a 64-server cluster.
//   build-*/bench/simulator_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include "../tests/fakes/fake_cost_model.h"
#include "dapple/cost/analytic_cost_model.h"
#include "dapple/sim/simulator.h"

namespace dapple {
namespace {

constexpr int kStages = 64, kMicroBatches = 512;

Plan BenchPlan(int replicas, ScheduleKind kind) {
  Plan p;
  p.micro_batch_size = 16 * replicas;
  p.num_micro_batches = kMicroBatches;
  p.global_batch_size = p.micro_batch_size * kMicroBatches;
  p.schedule = kind;
  for (int s = 0; s < kStages; ++s) {
    StagePlan sp;
    sp.first_layer = sp.last_layer = s;
    for (int j = 0; j < replicas; ++j) sp.devices.push_back(s * replicas + j);
    p.stages.push_back(sp);
  }
  return p;
}

void Run(benchmark::State& state, const CostModel& cost, const Plan& plan) {
  SimOptions options{.record_timeline = false};
  long long instructions = 0;
  double iteration_ms = 0;
  for (auto _ : state) {
    SimResult r = SimulatePlan(plan, cost, options);
    instructions += r.instructions;
    iteration_ms = r.iteration_ms;
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(instructions);
  state.counters["devices"] = static_cast<double>(plan.num_devices());
  state.counters["simulated_ms"] = iteration_ms;
}

// Args: replicas per stage, 1 = contended transfers (every transfer holds one shared link).
void BM_SimulateFake(benchmark::State& state) {
  const int replicas = static_cast<int>(state.range(0));
  FakeCostModel cost(kStages, kStages * replicas);
  cost.transfer_ms = 0.3;
  cost.allreduce_ms = 5;
  if (state.range(1)) cost.transfer_resources = {0};
  Run(state, cost, BenchPlan(replicas, ScheduleKind::kDappleA));
}
BENCHMARK(BM_SimulateFake)
    ->ArgsProduct({{1, 4, 16}, {0, 1}})
    ->ArgNames({"replicas", "contended"})
    ->Unit(benchmark::kMillisecond);

// The analytic model on 64 servers x 16 devices (25 GB/s inside, 25 Gbit/s between), a
// chain of 64 layers: transfers hold server ports and intra-server links.
void BM_SimulateAnalytic(benchmark::State& state) {
  const int replicas = static_cast<int>(state.range(0));
  Profile profile;
  profile.model = "bench";
  profile.batch_size = 16;
  for (int i = 0; i < kStages; ++i) {
    LayerProfile l;
    l.id = "node" + std::to_string(i);
    l.name = "layer";
    l.forward_ms = 1 + i % 3;
    l.backward_ms = 2 * l.forward_ms;
    l.activation_bytes = 4e6;
    l.parameter_bytes = 2e7;
    profile.layers.push_back(l);
  }
  Cluster cluster;
  cluster.name = "bench";
  cluster.servers.assign(64, ServerSpec{16, std::nullopt});
  cluster.intra_server = {25e9, 0};
  cluster.inter_server = {3.125e9, 5e-6};
  AnalyticCostModel cost(profile, cluster);
  Run(state, cost, BenchPlan(replicas, static_cast<ScheduleKind>(state.range(1))));
}
BENCHMARK(BM_SimulateAnalytic)
    ->ArgsProduct({{1, 4, 16}, {0, 1, 2}})
    ->ArgNames({"replicas", "schedule"})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dapple

BENCHMARK_MAIN();
