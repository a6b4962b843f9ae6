// The planner's choice of the layers that re-compute (Note [Choosing the layers that
// re-compute]) against an exhaustive search over every subset on random small stages, and
// RecomputeWhereNeeded on plans where per-layer re-computation beats the whole stage or is
// the only choice that fits, as the simulator says; the memo of choices against the chooser.
#include "dapple/plan/recompute_choice.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <random>

#include "dapple/cost/recompute_costs.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

// What `layers` hold and cost, through the cost model's segment figures (not the
// chooser's per-layer sums).
double Held(const RecomputeProblem& p, const std::vector<int>& layers) {
  return HeldActivationBytes(
      RecomputeActivationBytes(*p.cost, p.first, p.last, layers, p.micro_batch), p.held, p.split);
}
double ExtraMs(const RecomputeProblem& p, const std::vector<int>& layers) {
  return RecomputeForwardMs(*p.cost, layers, p.micro_batch, p.devices[0]);
}

// The fastest subset that fits, over all 2^n subsets of the stage's layers.
std::optional<double> ExhaustiveBestMs(const RecomputeProblem& p) {
  const int n = p.last - p.first + 1;
  std::optional<double> best;
  for (int mask = 0; mask < (1 << n); ++mask) {
    std::vector<int> layers;
    for (int i = 0; i < n; ++i)
      if (mask >> i & 1) layers.push_back(p.first + i);
    if (Held(p, layers) > p.budget_bytes * (1 + 1e-12)) continue;
    const double ms = ExtraMs(p, layers);
    if (!best || ms < *best) best = ms;
  }
  return best;
}

// How the chooser fared on `trials` random stages of `min_layers` + (trial % spread)
// layers: choices found where the exhaustive search found one, and how many were its optimum.
struct Tally {
  int cases = 0, feasible = 0, optimal = 0;
  int missed = 0;    // stages where a choice fits but the chooser found none
  double worst = 1;  // the largest ratio of the chosen extra forward to the optimum
};

Tally RunRandomStages(int trials, int min_layers, int spread, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> ms(0.1, 5), mb(0.5, 8);
  Tally t;
  for (int trial = 0; trial < trials; ++trial) {
    const int n = min_layers + trial % spread;
    FakeCostModel cost(n + 2, 1);
    for (int l = 0; l < n + 2; ++l) {
      cost.fwd_ms[l] = ms(rng);
      cost.act_bytes[l] = mb(rng) * 1e6;
    }
    RecomputeProblem p;
    p.cost = &cost;
    p.first = 1 + trial % 2;
    p.last = p.first + n - 1;
    p.devices = {0};
    p.micro_batch = 1;
    const int K = 1 + trial % 4;
    p.split = trial % 3 == 0;
    p.held = p.split ? std::vector<HeldMicroBatches>{{K, 0}, {K, K / 2 + 1}}
                     : std::vector<HeldMicroBatches>{{K, 0}};
    // A budget between the least any subset holds and 10% over holding everything.
    double none = Held(p, {}), least = none;
    for (int mask = 0; mask < (1 << n); ++mask) {
      std::vector<int> layers;
      for (int i = 0; i < n; ++i)
        if (mask >> i & 1) layers.push_back(p.first + i);
      least = std::min(least, Held(p, layers));
    }
    p.budget_bytes = least + (none - least) * std::uniform_real_distribution<double>(0, 1.1)(rng);
    ++t.cases;
    const std::optional<double> best = ExhaustiveBestMs(p);
    const std::optional<std::vector<int>> chosen = ChooseRecomputeLayers(p);
    if (!chosen) {
      t.missed += best.has_value() ? 1 : 0;
      continue;
    }
    ++t.feasible;
    EXPECT_LE(Held(p, *chosen), p.budget_bytes * (1 + 1e-9)) << "trial " << trial;
    EXPECT_TRUE(best.has_value()) << "trial " << trial;
    if (!best) continue;
    const double got = ExtraMs(p, *chosen);
    EXPECT_GE(got, *best - 1e-9) << "trial " << trial;
    if (got <= *best + 1e-9) ++t.optimal;
    t.worst = std::max(t.worst, *best > 0 ? got / *best : 1.0);
  }
  return t;
}

// Up to kExhaustiveLayers layers the chooser tries every subset: the exhaustive optimum on
// every stage (the test's search costs segments through the cost model, the chooser from
// per-layer sums).
TEST(RecomputeChoice, SmallStagesGetTheExhaustiveOptimum) {
  const Tally t = RunRandomStages(400, 2, 9, 7);
  EXPECT_GT(t.feasible, t.cases / 2);
  EXPECT_EQ(t.missed, 0);
  EXPECT_EQ(t.optimal, t.feasible);
}

// Beyond it the greedy: every choice fits, and on 24 random stages of 13-15 layers it finds
// one on all but at most one where one exists, the optimum on more than half, and never
// 1.5 times the optimum's extra forward.
TEST(RecomputeChoice, LargerStagesGetAGreedyChoiceNearTheExhaustiveOptimum) {
  const Tally t = RunRandomStages(24, kExhaustiveLayers + 1, 3, 11);
  std::printf("greedy: %d stages, %d choices, %d missed, %d optimal, worst %.3f x the optimum\n",
              t.cases, t.feasible, t.missed, t.optimal, t.worst);
  EXPECT_GT(t.feasible, t.cases / 2);
  EXPECT_LE(t.missed, 1);
  EXPECT_GT(t.optimal, t.feasible / 2);
  EXPECT_LT(t.worst, 1.5);
}

// Whether every device of the simulated plan fits its memory.
bool FitsMemory(const SimResult& r, const CostModel& cost) {
  for (const DeviceStats& d : r.devices)
    if (d.peak_memory_bytes > cost.DeviceMemoryBytes(d.device)) return false;
  return true;
}

// Stage 0 (layers 0..5, 1 MB activations and 4 MB static each, the model input not counted)
// under gpipe with M = 4 holds 24 + 4 x 6 = 48 MB, over the 40 MB of its device. The whole
// stage re-computing holds 24 + 6 = 30 MB. A segment frees its layers' outputs but its last's
// when a layer follows it (the next layer's input): the last three layers hold 24 + 4 x 3 + 3
// = 39 MB, any two layers at least 24 + 4 x 4 + 2 = 42 MB, any other three 42 MB or more:
// layers 3..5, at half the extra forwards, are the planner's choice, and faster as the
// simulator says.
TEST(RecomputeWhereNeeded, PerLayerFitsWithFewerExtraForwardsThanTheWholeStage) {
  FakeCostModel cost(8, 2);
  cost.memory_bytes = 40e6;
  Plan plan = testing::MakePlan({{0, 5, {0}}, {6, 7, {1}}}, 1, 4, ScheduleKind::kGPipe);
  EXPECT_FALSE(FitsMemory(SimulatePlan(plan, cost), cost));
  const std::vector<bool> timed(8, true);
  ASSERT_TRUE(RecomputeWhereNeeded(plan, cost, timed));
  EXPECT_FALSE(plan.stages[0].recompute);
  // The last three layers (two or fewer do not fit), not all six.
  EXPECT_EQ(plan.stages[0].recompute_layers, (std::vector<int>{3, 4, 5}));
  EXPECT_FALSE(plan.RecomputesAny(1));
  const SimResult some = SimulatePlan(plan, cost);
  EXPECT_TRUE(FitsMemory(some, cost));
  EXPECT_LE(some.devices[0].peak_memory_bytes, 40e6);
  Plan whole_plan = plan;
  whole_plan.stages[0].recompute_layers.clear();
  whole_plan.stages[0].recompute = true;
  const SimResult whole = SimulatePlan(whole_plan, cost);
  EXPECT_TRUE(FitsMemory(whole, cost));
  EXPECT_LT(some.iteration_ms, whole.iteration_ms);
}

// The last stage (layers 2..7, activations 1, 1, 8, 1, 1, 8 MB, its input 1 MB; K = 1 under
// dapple-a) holds 24 + 1 + 20 = 45 MB without re-computation and as much re-computing whole,
// both over 40 MB; re-computing layers 4, 5 and 7 keeps the input and 1 + 1 + 1 + 1 MB (the
// segments' inputs and layer 5's output, layer 6's input, among them) and rebuilds 9 MB at
// most: 38 MB, the only choice of three layers or fewer that fits.
TEST(RecomputeWhereNeeded, PerLayerFitsWhereNeitherNoneNorTheWholeStageDoes) {
  FakeCostModel cost(8, 2);
  cost.memory_bytes = 40e6;
  cost.act_bytes = {1e6, 1e6, 1e6, 1e6, 8e6, 1e6, 1e6, 8e6};
  Plan plan = testing::MakePlan({{0, 1, {0}}, {2, 7, {1}}}, 1, 4, ScheduleKind::kDappleA);
  EXPECT_FALSE(FitsMemory(SimulatePlan(plan, cost), cost));
  Plan whole_plan = plan;
  whole_plan.stages[1].recompute = true;
  EXPECT_FALSE(FitsMemory(SimulatePlan(whole_plan, cost), cost));
  ASSERT_TRUE(RecomputeWhereNeeded(plan, cost, std::vector<bool>(8, true)));
  EXPECT_EQ(plan.stages[1].recompute_layers, (std::vector<int>{4, 5, 7}));
  const SimResult r = SimulatePlan(plan, cost);
  EXPECT_TRUE(FitsMemory(r, cost));
  EXPECT_DOUBLE_EQ(r.devices[1].peak_memory_bytes, 38e6);
}

// A fake with two kinds of device (CostModel::DeviceKind's contract: devices of one kind
// cost the same): devices 0-2, and devices 3-5, which run the odd layers 4 times faster and
// the even ones at the same speed. So which replica gets the larger slice changes the
// stage's forwards layer by layer, not all alike.
class TwoKinds : public FakeCostModel {
 public:
  TwoKinds() : FakeCostModel(16, 6) {}
  int DeviceKind(int d) const override { return d < 3 ? 0 : 1; }
  double ForwardMs(int first, int last, double samples, int device) const override {
    double ms = 0;
    for (int l = first; l <= last; ++l)
      ms += fwd_ms.at(l) * samples / pbs / (DeviceKind(device) == 1 && l % 2 == 1 ? 4.0 : 1.0);
    return ms;
  }
};

// Note [Re-computation choices kept]: 200 questions about 8 stages, each on two replicas
// of the two kinds in either order, on devices picked at random: the memo answers each as
// ChooseRecomputeLayers does (checked to fail with the kinds in the key sorted, or left
// out), and refuses a second cost model.
TEST(RecomputeMemo, AnswersAsTheChooserForDevicesOfTheSameKinds) {
  TwoKinds cost;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> ms(0.1, 5), mb(0.5, 8);
  for (int l = 0; l < 16; ++l) {
    cost.fwd_ms[l] = ms(rng);
    cost.act_bytes[l] = mb(rng) * 1e6;
  }
  RecomputeMemo memo;
  int asked = 0, recomputing = 0, none = 0;
  for (int trial = 0; trial < 200; ++trial) {
    // Few problems (8 but for the devices), each on two replicas, one of kind 0 (devices
    // 0-2) and one of kind 1 (3-5) in either order: most come again on other devices.
    RecomputeProblem p;
    p.cost = &cost;
    p.first = static_cast<int>(rng() % 2);
    p.last = p.first + 7;
    const bool kind0_first = rng() % 2 == 0;
    const int d0 = static_cast<int>(rng() % 3), d1 = 3 + static_cast<int>(rng() % 3);
    p.devices = kind0_first ? std::vector<int>{d0, d1} : std::vector<int>{d1, d0};
    p.micro_batch = 3;  // slices of 2 and 1 samples
    p.split = rng() % 2 == 0;
    p.held = p.split ? std::vector<HeldMicroBatches>{{2, 0}, {2, 1}}
                     : std::vector<HeldMicroBatches>{{2, 0}};
    // Budgets from two shares of what a replica holds without re-computing.
    p.budget_bytes = HeldBytesOf(p, CostsOfLayers(p), {}) * (rng() % 2 == 0 ? 0.6 : 0.75);
    const std::optional<std::vector<int>> own = ChooseRecomputeLayers(p);
    EXPECT_EQ(memo.Choose(p), own) << "trial " << trial;
    ++asked;
    recomputing += own && !own->empty() ? 1 : 0;
    none += own ? 0 : 1;
  }
  std::printf("memo: %d asked, %d recompute, %d no fit\n", asked, recomputing, none);
  EXPECT_GT(recomputing, asked / 4);  // the problems are not all trivial
  FakeCostModel other(16, 6);
  RecomputeProblem p;
  p.cost = &other;
  p.last = 3;
  p.devices = {0};
  EXPECT_ANY_THROW(memo.Choose(p));  // one memo, one cost model
}

}  // namespace
}  // namespace dapple
