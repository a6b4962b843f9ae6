// DappleDp (dapple_dp.h) against a plain version of the same recurrence written here: no
// caches of costs, placements or state keys (Note [The DP's caches] in dp_costs.cc, Note
// [Placement from one usage], Note [Usages by incremental hash]), no latency over a shared
// tail, every suffix a full copy. On seeded random problems (fake costs, the analytic model,
// mixed clusters), with the beam, the suffixes per state and the number of plans returned
// at their defaults and small, the two return the same plans with the same L, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "dapple/plan/dp/dapple_dp.h"
#include "dapple/plan/dp/layer_blocks.h"
#include "dapple/plan/dp/placement.h"
#include "dapple/plan/pipeline_latency.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/planner.h"
#include "dapple/schedule/schedule.h"
#include "random_mixed_problems.h"
#include "random_problems.h"
#include "stages_text.h"

namespace dapple {
namespace {

struct Suffix {
  double score = 0;
  std::vector<StagePlan> stages;  // front first
  std::vector<int> usage;         // devices taken per server
  std::vector<LatencyStage> lat;  // front first, the transfers between stages included
  double peak_memory = 0;
};

struct Done {
  double latency;
  long long order;
  std::vector<StagePlan> stages;
  double peak_memory;
};

class PlainDp {
 public:
  PlainDp(const CostModel& cost, const Cluster& cluster, const DpOptions& o)
      : cost_(cost), cluster_(cluster), o_(o), orders_(ServerOrders(cluster)) {
    const int devices = cluster.num_devices();
    ends_ = BlockEnds(cost, o.max_blocks > 0 ? o.max_blocks : DefaultMaxBlocks(devices));
    const int nb = static_cast<int>(ends_.size());
    per_state_ = o.suffixes_per_state > 0 ? o.suffixes_per_state : nb * devices <= 160 ? 4 : 1;
    max_states_ = o.max_states > 0 ? o.max_states : devices <= 64 ? 2000 : 48;
    for (const ServerSpec& s : cluster.servers) server_size_ = std::max(server_size_, s.devices);
  }

  std::vector<DpCandidate> Run() {
    const int nb = static_cast<int>(ends_.size());
    std::vector<std::vector<std::vector<Suffix>>> memo(nb + 1);  // [block][state]
    Suffix empty;
    empty.usage.assign(cluster_.num_servers(), 0);
    memo[nb].resize(StateOf(empty.usage) + 1);
    memo[nb].back().push_back(empty);
    for (int i = nb; i >= 1; --i) {
      Beam(memo[i]);
      for (const auto& suffixes : memo[i])
        for (const Suffix& suffix : suffixes) Extend(i, suffix, memo);
    }
    std::stable_sort(done_.begin(), done_.end(), [](const Done& a, const Done& b) {
      return a.latency != b.latency ? a.latency < b.latency : a.order < b.order;
    });
    std::vector<DpCandidate> out;
    for (size_t k = 0; k < done_.size() && static_cast<int>(k) < o_.top_k; ++k)
      out.push_back({PlanOf(done_[k].stages), done_[k].latency, done_[k].peak_memory});
    return out;
  }

 private:
  // States in the order first seen; identical servers are interchangeable (the sorted
  // usage is the key).
  int StateOf(std::vector<int> usage) {
    if (IdenticalServers(cluster_)) std::sort(usage.begin(), usage.end());
    return ids_.try_emplace(usage, static_cast<int>(ids_.size())).first->second;
  }

  void Beam(std::vector<std::vector<Suffix>>& states) {
    std::vector<std::pair<double, size_t>> best;
    for (size_t id = 0; id < states.size(); ++id)
      if (!states[id].empty()) best.emplace_back(states[id].front().score, id);
    std::sort(best.begin(), best.end());
    for (size_t r = max_states_; r < best.size(); ++r) states[best[r].second].clear();
  }

  std::vector<int> Devices(const std::vector<int>& usage, const std::vector<int>& counts) const {
    std::vector<int> devices = DevicesOf(cluster_, usage, counts);
    if (orders_.size() > 1) FastestFirst(cluster_, devices);
    return devices;
  }

  void Extend(int i, const Suffix& suffix, std::vector<std::vector<std::vector<Suffix>>>& memo) {
    int used = 0;
    for (int u : suffix.usage) used += u;
    const int free = cluster_.num_devices() - used;
    if (std::min(free, o_.micro_batch_size) < 1) return;
    const int depth = static_cast<int>(suffix.stages.size());
    const int k = WarmupDepth(o_.memory_schedule, 0, depth + 1, o_.num_micro_batches);
    for (int n : ReplicaCounts(std::min(free, o_.micro_batch_size), server_size_)) {
      std::vector<std::vector<int>> tried;
      for (const ServerOrder& order : orders_)
        for (PlacementPolicy policy : AllPlacementPolicies()) {
          auto counts = orders_.size() > 1 ? PlaceCountsInOrder(order, suffix.usage, n, policy)
                                           : PlaceCounts(cluster_, suffix.usage, n, policy);
          if (!counts || std::count(tried.begin(), tried.end(), *counts)) continue;
          tried.push_back(*counts);
          Suffix next;
          next.usage = suffix.usage;
          for (size_t s = 0; s < next.usage.size(); ++s) next.usage[s] += (*counts)[s];
          const int state = StateOf(next.usage);
          const std::vector<int> devices = Devices(suffix.usage, *counts);
          for (int ip = i - 1; ip >= 0; --ip)
            Prepend(i, ip, k, suffix, devices, free - n, next, state, memo);
        }
    }
  }

  void Prepend(int i, int ip, int k, const Suffix& suffix, const std::vector<int>& devices,
               int free_after, Suffix next, int state,
               std::vector<std::vector<std::vector<Suffix>>>& memo) {
    const int m = o_.micro_batch_size, M = o_.num_micro_batches;
    const int first = ip == 0 ? 0 : ends_[ip - 1] + 1, last = ends_[i - 1];
    StageCost c = EvaluateStage(cost_, first, last, devices, m, k);
    if (!c.fits() && devices.size() > 1) {  // sharded where only that fits (dp_costs.h)
      const StageCost sharded = EvaluateStage(cost_, first, last, devices, m, k, false, false,
                                              false, /*shard_optimizer=*/true);
      if (sharded.fits()) c = sharded;
    }
    if (o_.enforce_memory && !c.fits()) return;
    next.lat = {{c.forward_ms, c.backward_ms, c.allreduce_ms, c.update_ms}};
    if (!suffix.stages.empty()) {
      const double t = cost_.TransferMs(last, m, devices, suffix.stages.front().devices);
      next.lat.push_back({t, t, 0.0, 0.0});
      next.lat.insert(next.lat.end(), suffix.lat.begin(), suffix.lat.end());
    }
    next.stages = suffix.stages;
    next.stages.insert(next.stages.begin(), StagePlan{first, last, "", "", devices});
    next.stages.front().shard_optimizer = c.shard_optimizer;
    next.peak_memory = std::max(suffix.peak_memory, c.memory_bytes);
    if (ip == 0) {
      done_.push_back(
          {ComputeLatency(next.lat, M).latency_ms, order_++, next.stages, next.peak_memory});
      return;
    }
    if (free_after == 0) return;
    // The paper's T_PL: the layers before as one stage on the free devices, fresh first.
    const int head_n = std::min(free_after, m);
    auto counts =
        orders_.size() > 1
            ? PlaceCountsInOrder(orders_[0], next.usage, head_n, PlacementPolicy::kFreshFirst)
            : PlaceCounts(cluster_, next.usage, head_n, PlacementPolicy::kFreshFirst);
    const std::vector<int> head = Devices(next.usage, *counts);
    const StageCost hc = EvaluateStage(cost_, 0, first - 1, head, m, 0);
    const double ht = cost_.TransferMs(first - 1, m, head, devices);
    std::vector<LatencyStage> scored = {
        {hc.forward_ms, hc.backward_ms, hc.allreduce_ms, hc.update_ms}, {ht, ht, 0.0, 0.0}};
    scored.insert(scored.end(), next.lat.begin(), next.lat.end());
    next.score = ComputeLatency(scored, M).latency_ms;
    if (static_cast<int>(memo[ip].size()) <= state) memo[ip].resize(state + 1);
    std::vector<Suffix>& kept = memo[ip][state];
    auto pos = std::upper_bound(kept.begin(), kept.end(), next.score,
                                [](double v, const Suffix& x) { return v < x.score; });
    kept.insert(pos, std::move(next));
    if (static_cast<int>(kept.size()) > per_state_) kept.pop_back();
  }

  Plan PlanOf(const std::vector<StagePlan>& stages) const {
    Plan p;
    p.planner = "dapple";
    p.micro_batch_size = o_.micro_batch_size;
    p.num_micro_batches = o_.num_micro_batches;
    p.global_batch_size = p.micro_batch_size * p.num_micro_batches;
    p.schedule = o_.memory_schedule;
    p.stages = stages;
    return p;
  }

  const CostModel& cost_;
  const Cluster& cluster_;
  const DpOptions& o_;
  std::vector<ServerOrder> orders_;
  std::vector<int> ends_;
  int per_state_ = 1, max_states_ = 1, server_size_ = 1;
  std::map<std::vector<int>, int> ids_;
  std::vector<Done> done_;
  long long order_ = 0;
};

using testing::StagesText;

// Returns the number of candidates compared.
int ExpectSameAsPlain(const testing::RandomProblem& p, DpOptions o) {
  int compared = 0;
  for (int m : MicroBatchSizes(p.global_batch)) {
    o.micro_batch_size = m;
    o.num_micro_batches = p.global_batch / m;
    const std::vector<DpCandidate> dp = DappleDp(*p.cost, p.cluster, o);
    const std::vector<DpCandidate> plain = PlainDp(*p.cost, p.cluster, o).Run();
    const std::string what = p.description + ", m " + std::to_string(m);
    EXPECT_EQ(dp.size(), plain.size()) << what;
    for (size_t k = 0; k < std::min(dp.size(), plain.size()); ++k) {
      EXPECT_EQ(StagesText(dp[k].plan), StagesText(plain[k].plan)) << what << ", #" << k;
      EXPECT_EQ(dp[k].latency_ms, plain[k].latency_ms) << what << ", #" << k;
      EXPECT_EQ(dp[k].peak_memory_bytes, plain[k].peak_memory_bytes) << what << ", #" << k;
      ++compared;
    }
  }
  return compared;
}

TEST(DappleDpReference, EqualsThePlainRecurrenceOnRandomProblems) {
  int compared = 0;
  for (unsigned seed = 0; seed < 60; ++seed) {
    for (auto& p : {testing::MakeRandomProblem(seed), testing::MakeRandomAnalyticProblem(seed),
                    testing::MakeRandomMixedProblem(seed)}) {
      DpOptions o;
      o.enforce_memory = seed % 3 != 0;
      o.memory_schedule = seed % 2 ? ScheduleKind::kDappleB : ScheduleKind::kDappleA;
      compared += ExpectSameAsPlain(*p, o);
    }
  }
  EXPECT_GT(compared, 3000);
}

// A narrow beam, one or two suffixes per state and few plans kept: the pruning rules too.
TEST(DappleDpReference, EqualsThePlainRecurrenceWithANarrowSearch) {
  int compared = 0;
  for (unsigned seed = 100; seed < 160; ++seed) {
    auto p = seed % 2 ? testing::MakeRandomAnalyticProblem(seed) : testing::MakeRandomProblem(seed);
    DpOptions o;
    o.max_states = 1 + seed % 4;
    o.suffixes_per_state = 1 + seed % 2;
    o.top_k = 1 + seed % 3;
    o.max_blocks = 2 + seed % 6;
    compared += ExpectSameAsPlain(*p, o);
  }
  EXPECT_GT(compared, 200);
}

}  // namespace
}  // namespace dapple
