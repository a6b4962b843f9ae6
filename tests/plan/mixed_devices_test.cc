// The planners on clusters of two device speeds: the DAPPLE
// planner puts more work on the faster devices, its DP does not depend on the order in
// which the servers are listed, and on small random mixed problems it stays near the
// exhaustive optimum and within every device's memory.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "dapple/common/slicing.h"
#include "dapple/cost/analytic_cost_model.h"
#include "dapple/plan/dp/dapple_dp.h"
#include "dapple/plan/dp/placement.h"
#include "dapple/plan/planner.h"
#include "dapple/plan/refine/refine_moves.h"
#include "plan/random_mixed_problems.h"

namespace dapple {
namespace {

// 12 equal layers (1 ms forward, 2 ms backward per sample at speed 1, small activations and
// parameters) on two servers of 2 devices: `fast_speed` on server `fast_server`, 1 on the
// other.
struct TwoSpeeds {
  TwoSpeeds(double fast_speed, int fast_server) {
    profile.model = "equal-layers";
    profile.batch_size = 1;
    for (int i = 0; i < 12; ++i) {
      LayerProfile l;
      l.id = fmt::format("l{}", i);
      l.name = l.id;
      l.forward_ms = 1;
      l.backward_ms = 2;
      l.activation_bytes = 1e5;
      l.parameter_bytes = 4e6;
      profile.layers.push_back(l);
    }
    cluster.name = "two-speeds";
    cluster.servers = {ServerSpec{2, std::nullopt}, ServerSpec{2, std::nullopt}};
    if (fast_speed != 1) cluster.servers[fast_server].device = DeviceSpec{16e9, fast_speed};
    cluster.device = DeviceSpec{16e9, 1.0};
    cluster.intra_server = LinkSpec{25e9, 0};
    cluster.inter_server = LinkSpec{12.5e9, 0};
  }
  Profile profile;
  Cluster cluster;
};

constexpr int kMixedGlobalBatch = 32;

// Each device's share of the model's compute per iteration: a stage's layers' forward and
// backward at speed 1, times the share of each micro-batch its replica computes.
std::vector<double> WorkPerDevice(const Plan& p, const Profile& profile, int num_devices) {
  std::vector<double> work(num_devices, 0);
  for (const StagePlan& st : p.stages) {
    double ms = 0;
    for (int l = st.first_layer; l <= st.last_layer; ++l)
      ms += profile.layers[l].forward_ms + profile.layers[l].backward_ms;
    const int r = static_cast<int>(st.devices.size());
    for (int j = 0; j < r; ++j)
      work[st.devices[j]] +=
          ms * static_cast<double>(SliceOf(p.micro_batch_size, r, j).size()) / p.micro_batch_size;
  }
  return work;
}

// What "more work on the faster devices" means here: the two devices of speed 2 together
// compute at least 60% of the model (a perfect balance gives them 2/3; equal shares 1/2),
// each of them more than each device of speed 1, and the plan takes at most 80% of the
// time of the same search on the cluster whose devices all run at speed 1 (perfect balance:
// 4/6 of it, as 4 devices do the work of 6).
TEST(MixedDevicesPlanner, MoreWorkOnTheFasterDevices) {
  TwoSpeeds slow(1.0, 0);
  AnalyticCostModel slow_cost(slow.profile, slow.cluster);
  PlanResult all_slow = RunPlanner(slow.profile, slow.cluster, slow_cost, kMixedGlobalBatch, {});
  ASSERT_TRUE(all_slow.plan) << all_slow.reason;
  for (int fast_server : {0, 1}) {
    SCOPED_TRACE(fmt::format("the fast server is server {}", fast_server));
    TwoSpeeds mixed(2.0, fast_server);
    AnalyticCostModel cost(mixed.profile, mixed.cluster);
    PlanResult r = RunPlanner(mixed.profile, mixed.cluster, cost, kMixedGlobalBatch, {});
    ASSERT_TRUE(r.plan) << r.reason;
    const std::string json = PlanToJsonText(*r.plan);
    std::vector<double> work = WorkPerDevice(*r.plan, mixed.profile, 4);
    double fast = 0, total = 0, least_fast = 1e300, most_slow = 0;
    for (int d = 0; d < 4; ++d) {
      total += work[d];
      if (mixed.cluster.ServerOf(d) == fast_server) {
        fast += work[d];
        least_fast = std::min(least_fast, work[d]);
      } else {
        most_slow = std::max(most_slow, work[d]);
      }
    }
    EXPECT_GE(fast, 0.6 * total) << json;
    EXPECT_GT(least_fast, most_slow) << json;
    EXPECT_LE(r.plan->estimate->iteration_ms, 0.8 * all_slow.plan->estimate->iteration_ms) << json;
  }
}

// The DP's best L is the same whichever server is listed first: its placements try the
// fast and the slow servers first alike.
TEST(MixedDevicesPlanner, DpDoesNotDependOnTheServerOrder) {
  for (double speed : {1.5, 2.0, 3.0}) {
    TwoSpeeds a(speed, 0), b(speed, 1);
    AnalyticCostModel cost_a(a.profile, a.cluster), cost_b(b.profile, b.cluster);
    for (int m : {1, 2, 4, 8}) {
      SCOPED_TRACE(fmt::format("speed {}, m = {}", speed, m));
      DpOptions o;
      o.micro_batch_size = m;
      o.num_micro_batches = kMixedGlobalBatch / m;
      std::vector<DpCandidate> ca = DappleDp(cost_a, a.cluster, o);
      std::vector<DpCandidate> cb = DappleDp(cost_b, b.cluster, o);
      ASSERT_FALSE(ca.empty());
      ASSERT_FALSE(cb.empty());
      EXPECT_NEAR(ca[0].latency_ms, cb[0].latency_ms, 1e-9 * ca[0].latency_ms)
          << PlanToJsonText(ca[0].plan) << PlanToJsonText(cb[0].plan);
    }
  }
}

// The refinement's moves on a mixed cluster (devices 0-1 of speed 1 on server 0, 2-3 of
// speed 2 on server 1): every neighbour lists each stage's devices fastest first, and a
// swap can give the later stage a fast device (a's fastest for b's slowest) as well as
// give the earlier stage one.
TEST(MixedDevicesPlanner, RefinementMovesKeepTheFastestFirstAndSwapBothWays) {
  TwoSpeeds mixed(2.0, 1);
  AnalyticCostModel cost(mixed.profile, mixed.cluster);
  Plan p;
  p.planner = "test";
  p.global_batch_size = kMixedGlobalBatch;
  p.micro_batch_size = 4;
  p.num_micro_batches = kMixedGlobalBatch / 4;
  p.stages = {StagePlan{0, 5, "l0", "l5", {2, 0}}, StagePlan{6, 11, "l6", "l11", {1}}};
  RefineOptions options;
  options.sizes = {1, 2, 4, 8};
  options.schedules = {ScheduleKind::kDappleA};
  bool fast_to_later = false;
  for (const internal::Neighbour& n : internal::Neighbours(p, cost, mixed.cluster, options)) {
    for (const StagePlan& st : n.plan.stages) {
      std::vector<int> want = st.devices;
      FastestFirst(mixed.cluster, want);
      EXPECT_EQ(st.devices, want) << n.move;
    }
    fast_to_later = fast_to_later || (std::string(n.move) == "swap" &&
                                      n.plan.stages[1].devices == std::vector<int>{2} &&
                                      n.plan.stages[0].devices == std::vector<int>{0, 1});
  }
  EXPECT_TRUE(fast_to_later);
}

// Fewer problems under the sanitizers: the statistics are the regular build's business.
#ifdef DAPPLE_SANITIZED
constexpr int kMixedProblems = 8;
#else
constexpr int kMixedProblems = 60;
#endif

// The DAPPLE planner (the DP, and the DP with the refinement) against the exhaustive
// search on random mixed problems: never faster than it, within 5% of it in at least 95%
// of them, and every stage within the memory of each of its devices.
TEST(MixedDevicesPlanner, NearExhaustiveOnRandomMixedProblems) {
  int compared = 0, within5 = 0, dp_within5 = 0;
  double worst = 1, dp_worst = 1;
  for (int seed = 1; seed <= kMixedProblems; ++seed) {
    std::unique_ptr<testing::RandomProblem> owner = testing::MakeRandomMixedProblem(seed);
    testing::RandomProblem& p = *owner;
    SCOPED_TRACE(p.description);
    PlannerOptions o;
    o.interleave = false;  // the exhaustive search has one chunk per stage
    PlanResult dapple = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, o);
    PlannerOptions dp_only = o;
    dp_only.refine_work = 0;
    PlanResult dp = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, dp_only);
    o.planner = PlannerKind::kExhaustive;
    PlanResult truth = RunPlanner(p.profile, p.cluster, *p.cost, p.global_batch, o);
    if (!truth.plan) {
      EXPECT_FALSE(dapple.plan);
      continue;
    }
    ++compared;
    if (!dapple.plan || !dp.plan) {
      ADD_FAILURE() << "DAPPLE found no plan, exhaustive did";
      continue;
    }
    const double best = truth.plan->estimate->iteration_ms;
    const double ratio = dapple.plan->estimate->iteration_ms / best;
    const double dp_ratio = dp.plan->estimate->iteration_ms / best;
    EXPECT_GE(ratio, 1 - 1e-9) << "faster than the exhaustive optimum";
    EXPECT_GE(dp_ratio, 1 - 1e-9) << "faster than the exhaustive optimum";
    within5 += ratio <= 1.05;
    dp_within5 += dp_ratio <= 1.05;
    worst = std::max(worst, ratio);
    dp_worst = std::max(dp_worst, dp_ratio);
    if (ratio > 1.05 || ratio < 1 - 1e-9)
      std::printf("%s: ratio %.3f\n dapple: %s exhaustive: %s", p.description.c_str(), ratio,
                  PlanToJsonText(*dapple.plan).c_str(), PlanToJsonText(*truth.plan).c_str());
    // Every stage fits each of its devices (the fast ones may have less memory).
    const Plan& plan = *dapple.plan;
    for (int s = 0; s < plan.num_stages(); ++s)
      for (int d : plan.stages[s].devices)
        EXPECT_LE(plan.estimate->stage_peak_memory_bytes[s],
                  p.cost->DeviceMemoryBytes(d) * (1 + 1e-12))
            << "stage " << s << " on device " << d;
  }
  std::printf(
      "mixed devices: %d problems with a plan; within 5%% of the optimum: DAPPLE %d (worst "
      "%.4f), the DP alone %d (worst %.4f)\n",
      compared, within5, worst, dp_within5, dp_worst);
  ASSERT_GT(compared, kMixedProblems / 2);
#ifndef DAPPLE_SANITIZED
  EXPECT_GE(within5, 0.95 * compared);
#endif
}

}  // namespace
}  // namespace dapple
