// Beyond the exhaustive search's reach (16 layers, 9 devices): a problem whose good plan is
// known by hand, a hybrid that no simple baseline proposes. The DAPPLE planner must find a
// plan at least as fast as it, judged by the simulator, which neither knows of the other.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dapple/common/error.h"
#include "dapple/plan/baselines/exhaustive.h"
#include "dapple/plan/planner.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"

namespace dapple {
namespace {

constexpr int kLayers = 16, kDevices = 9, kGlobalBatch = 64;

// Layers 0-3: 4 GB of parameters each (an allreduce of them costs 200 ms), little compute
// (0.1 ms forward per sample). Layers 4-15: 1 MB of parameters, 2 ms forward per sample.
// Backward = 2 x forward everywhere; transfers free; memory no limit here.
struct HandProblem {
  FakeCostModel cost{kLayers, kDevices};
  Profile profile;
  Cluster cluster;
  HandProblem() {
    for (int l = 0; l < kLayers; ++l) {
      const bool heavy = l < 4;
      cost.fwd_ms[l] = heavy ? 0.1 : 2.0;
      cost.bwd_ms[l] = 2 * cost.fwd_ms[l];
      cost.param_bytes[l] = heavy ? 1e9 : 1e6;
      LayerProfile layer;
      layer.id = fmt::format("l{}", l);
      layer.name = "layer";
      profile.layers.push_back(layer);
    }
    cost.allreduce_ms_per_byte = 5e-8;
    cost.memory_bytes = 1e12;
    profile.model = "hand";
    profile.batch_size = 1;
    cluster.name = "one server";
    cluster.servers = {ServerSpec{kDevices, {}}};
  }
  // The hand-built plan: the heavy, cheap layers alone on device 0 (no allreduce), the
  // compute on the 8 others, one sample each per micro-batch of 8.
  Plan HandPlan() const {
    Plan p;
    p.planner = "hand";
    p.global_batch_size = kGlobalBatch;
    p.micro_batch_size = 8;
    p.num_micro_batches = kGlobalBatch / 8;
    p.schedule = ScheduleKind::kDappleA;
    p.stages = {StagePlan{0, 3, "l0", "l3", {0}},
                StagePlan{4, kLayers - 1, "l4", "l15", {1, 2, 3, 4, 5, 6, 7, 8}}};
    return p;
  }
  double Ms(const std::string& planner) {
    PlannerOptions o;
    o.planner = ParsePlannerKind(planner);
    PlanResult r = RunPlanner(profile, cluster, cost, kGlobalBatch, o);
    EXPECT_TRUE(r.plan) << planner << ": " << r.reason;
    return r.plan ? r.plan->estimate->iteration_ms : 0;
  }
};

TEST(HandPlan, TheProblemIsBeyondTheExhaustiveSearch) {
  EXPECT_TRUE(kLayers > kExhaustiveMaxLayers || kDevices > kExhaustiveMaxDevices);
}

TEST(HandPlan, DapplePlansAtLeastAsFastAsTheHandBuiltHybrid) {
  HandProblem p;
  const Plan hand = p.HandPlan();
  ValidatePlan(hand, p.profile, p.cluster, "hand plan");
  const double hand_ms = SimulatePlan(hand, p.cost).iteration_ms;
  // By hand: 8 micro-batches through stage 1 at 72 ms each, plus stage 0's first forward
  // and last backward (3.2 + 6.4 ms) and stage 1's 0.12 ms allreduce: about 586 ms.
  EXPECT_NEAR(hand_ms, 8 * 72 + 3.2 + 6.4, 5);
  // The hybrid beats the simple baselines by a margin: data parallelism pays the 200 ms
  // allreduce, pipelines without replication leave compute on too few devices.
  for (const char* b : {"dp", "straight", "gpipe"}) {
    EXPECT_LT(hand_ms, 0.95 * p.Ms(b)) << "baseline " << b;
  }
  // DAPPLE finds it or better.
  EXPECT_LE(p.Ms("dapple"), hand_ms * (1 + 1e-9));
}

}  // namespace
}  // namespace dapple
