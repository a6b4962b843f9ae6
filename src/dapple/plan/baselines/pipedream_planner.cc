// PipeDream's planner objective as a baseline: see baselines.h.
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/baselines/pipedream_costs.h"
#include "dapple/plan/dp/layer_blocks.h"
#include "dapple/schedule/schedule.h"

namespace dapple {

namespace {

// best[i][d]: the slowest stage or transfer when the blocks i..nb-1 run on the last d
// devices (ids D-d..D-1); from[i][d]: (the next stage's first block, this stage's devices).
struct PipeDreamTable {
  std::vector<std::vector<double>> best;
  std::vector<std::vector<std::pair<int, int>>> from;
};

constexpr double kNone = 1e300;

// The DP over block ends i from the last, each a stage's end: every stage that ends there
// (its first block ip, its replica count n) in front of every suffix (d devices) found.
PipeDreamTable PipeDreamSearch(const CostModel& cost, const Cluster& cluster, MicroBatching mb,
                               bool enforce_memory, const std::vector<int>& ends) {
  const int m = mb.micro_batch_size, M = mb.num_micro_batches;
  const int nb = static_cast<int>(ends.size()), D = cluster.num_devices();
  PipeDreamTable t{std::vector<std::vector<double>>(nb + 1, std::vector<double>(D + 1, kNone)),
                   std::vector<std::vector<std::pair<int, int>>>(
                       nb + 1, std::vector<std::pair<int, int>>(D + 1))};
  t.best[nb][0] = 0;
  internal::PipeDreamCosts costs(cost, cluster, m, ends);
  for (int i = nb; i >= 1; --i) {
    costs.StartBlock(i);
    for (int d = 0; d < D; ++d) {
      if (t.best[i][d] >= kNone) continue;
      // At most this many stages can follow, each on a block and a device of its own.
      const int after = std::min(nb - i, d);
      const int k = WarmupDepth(ScheduleKind::kDappleA, 0, after + 1, M);
      for (int n : costs.Counts(std::min(D - d, m))) {
        costs.StartStage(d, n, t.from[i][d].second);
        for (int ip = i - 1; ip >= 0; --ip) {
          const StageCost c = costs.Stage(ip, k);
          if (enforce_memory && !c.fits()) continue;
          const double v = std::max(
              t.best[i][d], std::max(c.forward_ms + c.backward_ms + c.allreduce_ms + c.update_ms,
                                     costs.TransferMs()));
          if (v < t.best[ip][d + n]) {
            t.best[ip][d + n] = v;
            t.from[ip][d + n] = {i, n};
          }
        }
      }
    }
  }
  return t;
}

// The plan of the table's best complete partition, or none.
std::optional<Plan> PipeDreamPlanOf(const PipeDreamTable& t, MicroBatching mb,
                                    const std::vector<int>& ends, int D) {
  int bd = -1;
  for (int d = 1; d <= D; ++d)
    if (t.best[0][d] < kNone && (bd < 0 || t.best[0][d] < t.best[0][bd])) bd = d;
  if (bd < 0) return std::nullopt;
  Plan p;
  p.planner = "pipedream";
  p.micro_batch_size = mb.micro_batch_size;
  p.num_micro_batches = mb.num_micro_batches;
  p.global_batch_size = mb.micro_batch_size * mb.num_micro_batches;
  p.schedule = ScheduleKind::kDappleA;
  const int nb = static_cast<int>(ends.size());
  for (int i = 0, d = bd; i < nb;) {
    auto [ni, n] = t.from[i][d];
    StagePlan s;
    s.first_layer = i == 0 ? 0 : ends[i - 1] + 1;
    s.last_layer = ends[ni - 1];
    for (int x = D - d; x < D - d + n; ++x) s.devices.push_back(x);
    p.stages.push_back(std::move(s));
    i = ni;
    d -= n;
  }
  return p;
}

}  // namespace

std::optional<Plan> PipeDreamPlan(const CostModel& cost, const Cluster& cluster, MicroBatching mb,
                                  bool enforce_memory, int max_blocks) {
  const std::vector<int> ends =
      BlockEnds(cost, max_blocks > 0 ? max_blocks : DefaultMaxBlocks(cluster.num_devices()));
  return PipeDreamPlanOf(PipeDreamSearch(cost, cluster, mb, enforce_memory, ends), mb, ends,
                         cluster.num_devices());
}

}  // namespace dapple
