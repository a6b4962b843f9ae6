// Re-computation per layer in the simulator against formulas on a chain (FakeCostModel):
// the extra forward is the re-computed layers' forwards; a micro-batch keeps the stage's
// input and the layers' outputs but those a segment frees (its layers', but its last's when
// a layer follows it in the stage); a backward rebuilds one segment; a split
// backward holds what it rebuilt from I to W. Per-layer peaks lie between none and the
// whole stage.
#include <gtest/gtest.h>

#include <algorithm>

#include "dapple/format/plan.h"
#include "dapple/schedule/schedule.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using testing::MakePlan;

// Stage 0: layers 0..3 on device 0 (K = 2 under dapple-a), stage 1: layers 4..5 on device 1;
// m = 1 = PBS, M = 4. Layer l: forward 1, 2, 3, 4, 1, 1 ms; activations 1..6 MB; the model
// input 0.5 MB.
struct ChainOfSix : ::testing::Test {
  ChainOfSix() : cost(6, 2) {
    cost.fwd_ms = {1, 2, 3, 4, 1, 1};
    cost.act_bytes = {1e6, 2e6, 3e6, 4e6, 5e6, 6e6};
    cost.input_bytes = 0.5e6;
    plan = MakePlan({{0, 3, {0}}, {4, 5, {1}}}, 1, 4, ScheduleKind::kDappleA);
  }
  double Peak(const Plan& p) { return SimulatePlan(p, cost).devices[0].peak_activation_bytes; }
  FakeCostModel cost;
  Plan plan;
};

TEST_F(ChainOfSix, OneSegmentKeepsItsInputAndRebuildsOnce) {
  const double none = Peak(plan);
  EXPECT_DOUBLE_EQ(none, 2 * (0.5e6 + 10e6));  // K x (the input and all four layers)
  plan.stages[0].recompute_layers = {2, 3};
  SimResult r = SimulatePlan(plan, cost);
  // Kept: the input (0.5 MB) and layers 0 and 1 (1 + 2 MB; layer 1's output is the segment's
  // input); rebuilt at B: layers 2..3 (7 MB).
  EXPECT_DOUBLE_EQ(r.devices[0].peak_activation_bytes, 2 * (0.5e6 + 1e6 + 2e6) + 7e6);
  // B = 4 layers x 2 ms + the forwards of layers 2 and 3.
  EXPECT_DOUBLE_EQ(r.stages[0].backward_ms, 8 + 3 + 4);
  EXPECT_DOUBLE_EQ(r.stages[1].backward_ms, 4);
  plan.stages[0].recompute_layers.clear();
  plan.stages[0].recompute = true;
  const double whole = Peak(plan);
  EXPECT_DOUBLE_EQ(whole, 2 * 0.5e6 + 10e6);
  EXPECT_LT(whole, r.devices[0].peak_activation_bytes);
  EXPECT_LT(r.devices[0].peak_activation_bytes, none);
}

TEST_F(ChainOfSix, EachSegmentKeepsItsOwnInput) {
  // Layers 1 and 3 apart: two segments, whose inputs (layers 0 and 2) stay; layer 1's output
  // is layer 2's input and stays too, so only layer 3's 4 MB is freed; the larger segment
  // (4 MB) is rebuilt at B.
  plan.stages[0].recompute_layers = {1, 3};
  EXPECT_DOUBLE_EQ(Peak(plan), 2 * (0.5e6 + 1e6 + 2e6 + 3e6) + 4e6);
  plan.stages[0].recompute_layers = {1, 2, 3};
  EXPECT_DOUBLE_EQ(Peak(plan), 2 * (0.5e6 + 1e6) + 9e6);
  // One layer in the middle frees nothing and adds its rebuilt output at B.
  plan.stages[0].recompute_layers = {1};
  EXPECT_DOUBLE_EQ(Peak(plan), 2 * (0.5e6 + 10e6) + 2e6);
}

TEST_F(ChainOfSix, AllLayersListedIsTheWholeStage) {
  plan.stages[0].recompute_layers = {0, 1, 2, 3};
  SimResult listed = SimulatePlan(plan, cost);
  plan.stages[0].recompute_layers.clear();
  plan.stages[0].recompute = true;
  SimResult whole = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(listed.iteration_ms, whole.iteration_ms);
  EXPECT_DOUBLE_EQ(listed.devices[0].peak_activation_bytes, whole.devices[0].peak_activation_bytes);
}

// zb-h1: I rebuilds the segment and the micro-batch holds it until its W. The peak is the
// largest, over the points of stage 0's list, of in-flight x kept + past-I x rebuilt.
TEST_F(ChainOfSix, SplitBackwardHoldsTheRebuiltSegmentUntilW) {
  plan.schedule = ScheduleKind::kZbH1;
  plan.stages[0].recompute_layers = {2, 3};
  const double kept = 0.5e6 + 1e6 + 2e6, rebuilt = 7e6;
  double expected = 0;
  int in_flight = 0, past_i = 0;
  const Schedule schedule = MakeSchedule(ScheduleKind::kZbH1, 2, 4);
  for (const Instruction& in : schedule.programs[0]) {
    in_flight += in.op == Op::kForward ? 1 : in.op == Op::kWeightGrad ? -1 : 0;
    past_i += in.op == Op::kInputGrad ? 1 : in.op == Op::kWeightGrad ? -1 : 0;
    expected = std::max(expected, in_flight * kept + past_i * rebuilt);
  }
  SimResult r = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(r.devices[0].peak_activation_bytes, expected);
  // I runs the segment's forward first; W does not.
  EXPECT_DOUBLE_EQ(r.stages[0].input_grad_ms, 4 + 3 + 4);
  EXPECT_DOUBLE_EQ(r.stages[0].weight_grad_ms, 4);
  plan.stages[0].recompute_layers.clear();
  EXPECT_LE(r.devices[0].peak_activation_bytes, Peak(plan));
}

}  // namespace
}  // namespace dapple
