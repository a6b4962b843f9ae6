// The allreduce overlapped with the backward (plan.allreduce_overlap): a hand-computed
// bucket chain, never slower than the paper's single allreduce on random plans, the
// no-overlap path unchanged, and the plan JSON field.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "dapple/common/error.h"
#include "dapple/cost/analytic_cost_model.h"
#include "dapple/cost/grad_buckets.h"
#include "dapple/format/plan.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using testing::MakePlan;
constexpr auto Find = testing::FindEvent;

// One stage, layers 0..3, on devices 0 and 1 (device 1 at half speed); m = 2 (one sample
// per replica), M = 2, dapple-a. Backward of layers 3, 2, 1, 0: 4, 3, 2, 1 ms (x2 on
// device 1). Parameters 4, 6, 3, 12 bytes, buckets of 10: from layer 3 down, [3] (12: too
// big for a bucket, alone), [1, 2] (9; layer 0 would make 13), [0] (4). Allreduce 0.5 ms +
// 0.25 ms per byte: buckets 3.5, 2.75 and 1.5 ms; the whole stage at once 6.75 ms.
//   dev 0: F0 [0,4] B0 [4,14] F1 [14,18] B1 [18,28]; buckets ready at 22, 27, 28
//   dev 1: F0 [0,8] B0 [8,28] F1 [28,36] B1 [36,56]; buckets ready at 44, 54, 56
//   buckets (ready on both): b0 [44,47.5], b1 [54,56.75], b2 [56.75,58.25]
//   AR on both devices [56,58.25]: 2.25 ms of 7.75 exposed; without overlap [56,62.75].
struct ThreeBuckets : ::testing::Test {
  ThreeBuckets() : cost(4, 2) {
    cost.fwd_ms = {1, 1, 1, 1};
    cost.bwd_ms = {1, 2, 3, 4};
    cost.param_bytes = {4, 6, 3, 12};
    cost.bucket_bytes = 10;
    cost.allreduce_ms = 0.5;
    cost.allreduce_ms_per_byte = 0.25;
    cost.speed = {1.0, 0.5};
    plan = MakePlan({{0, 3, {0, 1}}}, 2, 2, ScheduleKind::kDappleA);
  }
  FakeCostModel cost;
  Plan plan;
};

TEST_F(ThreeBuckets, Buckets) {
  std::vector<GradBucket> b = GradientBuckets(cost, 0, 3);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].first_layer, 3);
  EXPECT_EQ(b[0].last_layer, 3);
  EXPECT_EQ(b[1].first_layer, 1);
  EXPECT_EQ(b[1].last_layer, 2);
  EXPECT_EQ(b[2].first_layer, 0);
  EXPECT_EQ(b[2].last_layer, 0);
  EXPECT_EQ(BucketAllReduceMs(cost, b, {0, 1}), (std::vector<double>{3.5, 2.75, 1.5}));
}

TEST_F(ThreeBuckets, IterationIsTheEndOfTheBucketChain) {
  SimResult r = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(r.iteration_ms, 58.25);
  ASSERT_EQ(r.stages.size(), 1u);
  EXPECT_EQ(r.stages[0].allreduce_buckets, 3);
  EXPECT_DOUBLE_EQ(r.stages[0].allreduce_ms, 7.75);
  EXPECT_DOUBLE_EQ(r.stages[0].allreduce_exposed_ms, 2.25);
  EXPECT_DOUBLE_EQ(r.devices[0].busy_ms, 28);
  EXPECT_DOUBLE_EQ(r.devices[1].busy_ms, 56);

  const Timeline& t = r.timeline;
  ASSERT_EQ(t.device_labels.size(), 3u);  // 2 devices, no link, 1 bucket track
  EXPECT_EQ(t.device_labels[2], "allreduce stage 0 (buckets)");
  auto expect = [&](int track, const char* name, double start, double end) {
    const TimelineEvent* e = Find(t, track, name);
    ASSERT_NE(e, nullptr) << track << " " << name;
    EXPECT_DOUBLE_EQ(e->start_ms, start) << track << " " << name;
    EXPECT_DOUBLE_EQ(e->end_ms, end) << track << " " << name;
    EXPECT_EQ(e->category, "allreduce");
  };
  expect(2, "AR b0", 44, 47.5);
  expect(2, "AR b1", 54, 56.75);
  expect(2, "AR b2", 56.75, 58.25);
  expect(0, "AR", 56, 58.25);
  expect(1, "AR", 56, 58.25);
  EXPECT_EQ(Find(t, 2, "AR b3"), nullptr);
}

TEST_F(ThreeBuckets, WithoutOverlapOneAllReduceAfterTheLastBackward) {
  plan.allreduce_overlap = false;
  SimResult r = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(r.iteration_ms, 62.75);
  EXPECT_EQ(r.stages[0].allreduce_buckets, 0);
  EXPECT_DOUBLE_EQ(r.stages[0].allreduce_ms, 6.75);
  EXPECT_DOUBLE_EQ(r.stages[0].allreduce_exposed_ms, 6.75);
  ASSERT_EQ(r.timeline.device_labels.size(), 2u);
  for (const TimelineEvent& e : r.timeline.events)
    EXPECT_EQ(e.name.find("AR b"), std::string::npos);
}

TEST_F(ThreeBuckets, ExposedAllReduceOfOneReplicaMatchesTheSimulator) {
  // Both replicas at full speed: the stage computes M (F + B) = 28 ms, then the exposed part.
  cost.speed = {1.0, 1.0};
  std::vector<GradBucket> b = GradientBuckets(cost, 0, 3);
  const double exposed = ExposedAllReduceMs(cost, b, BucketAllReduceMs(cost, b, {0, 1}), 1, 0);
  EXPECT_DOUBLE_EQ(exposed, 3.25);  // b0 [22,25.5], b1 [27,29.75], b2 [29.75,31.25]
  EXPECT_DOUBLE_EQ(SimulatePlan(plan, cost).iteration_ms, 28 + exposed);
}

// With the default 25 MiB buckets every fake stage below is one bucket, which starts when
// the last backward has ended on every replica: exactly the paper's allreduce.
TEST(AllReduceOverlap, OneBucketIsThePapersAllReduce) {
  FakeCostModel cost(2, 3);
  cost.act_bytes = {1e6, 5e6};
  cost.transfer_ms = 0.5;
  cost.allreduce_ms = 3;
  Plan plan = MakePlan({{0, 0, {0, 1}}, {1, 1, {2}}}, 2, 2, ScheduleKind::kDappleA);
  SimResult on = SimulatePlan(plan, cost);
  plan.allreduce_overlap = false;
  SimResult off = SimulatePlan(plan, cost);
  EXPECT_DOUBLE_EQ(on.iteration_ms, 19);  // simulator_test.cc, TwoToOne
  EXPECT_EQ(on.iteration_ms, off.iteration_ms);
  EXPECT_EQ(on.stages[0].allreduce_buckets, 1);
  EXPECT_DOUBLE_EQ(on.stages[0].allreduce_exposed_ms, 3);
}

// A random profile (0-10 layers' worth of parameters each, some without), cluster and
// plan: stages of random layer ranges and replica counts, any schedule.
struct RandomCase {
  Profile profile;
  Cluster cluster;
  Plan plan;
};

RandomCase MakeRandomCase(unsigned seed, double latency_s) {
  std::mt19937 rng(seed);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  RandomCase c;
  const int layers = pick(1, 40);
  c.profile.model = "random";
  c.profile.batch_size = 4;
  for (int i = 0; i < layers; ++i) {
    LayerProfile l;
    l.id = "l" + std::to_string(i);
    l.name = l.id;
    l.forward_ms = uni(0.1, 5.0);
    l.backward_ms = l.forward_ms * uni(1.0, 3.0);
    l.activation_bytes = uni(1e5, 2e7);
    l.parameter_bytes = pick(0, 4) == 0 ? 0.0 : uni(1e5, 1.2e8);
    c.profile.layers.push_back(l);
  }
  const int servers = pick(1, 3), per_server = pick(1, 4);
  c.cluster.name = "random";
  for (int s = 0; s < servers; ++s) c.cluster.servers.push_back(ServerSpec{per_server, {}});
  c.cluster.intra_server = {uni(5e9, 50e9), latency_s};
  c.cluster.inter_server = {uni(0.5e9, 12.5e9), latency_s};
  const int devices = servers * per_server;
  const int S = pick(1, std::min(layers, devices));
  // Stage boundaries: S - 1 distinct cut points; devices: a shuffled split into S groups.
  std::vector<int> cuts(layers - 1);
  for (int i = 0; i < layers - 1; ++i) cuts[i] = i;
  std::shuffle(cuts.begin(), cuts.end(), rng);
  cuts.resize(S - 1);
  std::sort(cuts.begin(), cuts.end());
  std::vector<int> ids(devices);
  for (int d = 0; d < devices; ++d) ids[d] = d;
  std::shuffle(ids.begin(), ids.end(), rng);
  const int used = pick(S, devices);
  std::vector<int> split(used - 1);
  for (int i = 0; i < used - 1; ++i) split[i] = i + 1;
  std::shuffle(split.begin(), split.end(), rng);
  split.resize(S - 1);
  std::sort(split.begin(), split.end());
  std::vector<testing::StageSpec> stages;
  int max_replicas = 1;
  for (int s = 0; s < S; ++s) {
    int first = s == 0 ? 0 : cuts[s - 1] + 1, last = s + 1 < S ? cuts[s] : layers - 1;
    int lo = s == 0 ? 0 : split[s - 1], hi = s + 1 < S ? split[s] : used;
    std::vector<int> devs(ids.begin() + lo, ids.begin() + hi);
    std::sort(devs.begin(), devs.end());
    max_replicas = std::max(max_replicas, static_cast<int>(devs.size()));
    stages.push_back({first, last, devs});
  }
  const ScheduleKind kinds[] = {ScheduleKind::kGPipe, ScheduleKind::kDappleA,
                                ScheduleKind::kDappleB};
  c.plan = MakePlan(stages, max_replicas * pick(1, 4), pick(1, 8), kinds[pick(0, 2)]);
  ResolvePlanLayers(c.plan, c.profile, "random");
  ValidatePlan(c.plan, c.profile, c.cluster, "random");
  return c;
}

// Without link latency, bucket times add up to the whole allreduce and every bucket is
// ready no later than the paper's allreduce starts: overlap is never slower. A stage of
// several buckets always hides part of its allreduce; the iteration gains when that
// stage is the last to finish.
TEST(AllReduceOverlap, NeverSlowerOnRandomPlans) {
  int faster = 0, multi_bucket = 0;
  for (unsigned seed = 1; seed <= 300; ++seed) {
    RandomCase c = MakeRandomCase(seed, 0.0);
    AnalyticCostModel cost(c.profile, c.cluster);
    SimResult on = SimulatePlan(c.plan, cost, {.record_timeline = false});
    c.plan.allreduce_overlap = false;
    SimResult off = SimulatePlan(c.plan, cost, {.record_timeline = false});
    ASSERT_LE(on.iteration_ms, off.iteration_ms * (1 + 1e-12)) << "seed " << seed;
    bool several = false;
    for (int s = 0; s < c.plan.num_stages(); ++s) {
      EXPECT_NEAR(on.stages[s].allreduce_ms, off.stages[s].allreduce_ms,
                  1e-9 * off.stages[s].allreduce_ms)
          << "seed " << seed << " stage " << s;
      EXPECT_LE(on.stages[s].allreduce_exposed_ms, on.stages[s].allreduce_ms * (1 + 1e-12));
      if (on.stages[s].allreduce_buckets > 1) {
        several = true;
        EXPECT_LT(on.stages[s].allreduce_exposed_ms, off.stages[s].allreduce_exposed_ms)
            << "seed " << seed << " stage " << s;
      }
    }
    multi_bucket += several;
    faster += several && on.iteration_ms < off.iteration_ms * (1 - 1e-9);
  }
  EXPECT_GT(multi_bucket, 50);
  EXPECT_GE(faster, multi_bucket / 2) << faster << " of " << multi_bucket;
}

// With latency each extra bucket pays 2 (r - 1) latencies more; overlap costs at most that.
TEST(AllReduceOverlap, WithLatencyAtMostTheExtraLatenciesSlower) {
  const double latency_s = 2e-3;
  for (unsigned seed = 1; seed <= 150; ++seed) {
    RandomCase c = MakeRandomCase(seed, latency_s);
    AnalyticCostModel cost(c.profile, c.cluster);
    SimResult on = SimulatePlan(c.plan, cost, {.record_timeline = false});
    c.plan.allreduce_overlap = false;
    SimResult off = SimulatePlan(c.plan, cost, {.record_timeline = false});
    double extra = 0;
    for (int s = 0; s < c.plan.num_stages(); ++s) {
      const int r = c.plan.stages[s].replicas(), nb = on.stages[s].allreduce_buckets;
      if (nb > 1) extra = std::max(extra, (nb - 1) * 2.0 * (r - 1) * latency_s * 1e3);
    }
    EXPECT_LE(on.iteration_ms, (off.iteration_ms + extra) * (1 + 1e-12)) << "seed " << seed;
  }
}

// One bucket (a bucket size beyond every stage's parameters) gives the very same times as
// the paper's allreduce, on every random plan.
TEST(AllReduceOverlap, NoOverlapEqualsOneBucket) {
  for (unsigned seed = 1; seed <= 150; ++seed) {
    RandomCase c = MakeRandomCase(seed, 1e-4);
    CostOptions o;
    o.allreduce_bucket_bytes = 1e15;
    AnalyticCostModel cost(c.profile, c.cluster, o);
    SimResult on = SimulatePlan(c.plan, cost, {.record_timeline = false});
    c.plan.allreduce_overlap = false;
    SimResult off = SimulatePlan(c.plan, cost, {.record_timeline = false});
    EXPECT_EQ(on.iteration_ms, off.iteration_ms) << "seed " << seed;
    for (size_t d = 0; d < on.devices.size(); ++d)
      EXPECT_EQ(on.devices[d].bubble_ms, off.devices[d].bubble_ms) << "seed " << seed;
  }
}

TEST(AllReduceOverlap, PlanJsonField) {
  Plan plan = MakePlan({{0, 3, {0, 1}}}, 2, 2, ScheduleKind::kDappleA);
  EXPECT_TRUE(plan.allreduce_overlap);  // the default
  for (bool overlap : {true, false}) {
    plan.allreduce_overlap = overlap;
    std::string text = PlanToJsonText(plan);
    EXPECT_NE(text.find(overlap ? "\"allreduce_overlap\": true" : "\"allreduce_overlap\": false"),
              std::string::npos);
    Plan back = ParsePlanJson(text, "plan.json");
    EXPECT_EQ(back.allreduce_overlap, overlap);
    EXPECT_EQ(PlanToJsonText(back), text);
  }
  // Absent: overlapped (plans written before the field read as overlapped).
  const char* old = R"({"format": "dapple-plan/1", "global_batch_size": 4,
    "micro_batch_size": 2, "stages": [{"first_layer": 0, "last_layer": 3, "devices": [0, 1]}]})";
  EXPECT_TRUE(ParsePlanJson(old, "old.json").allreduce_overlap);
  // Not a boolean: one line naming the file and the field.
  const char* bad = R"({"format": "dapple-plan/1", "global_batch_size": 4,
    "micro_batch_size": 2, "allreduce_overlap": "yes",
    "stages": [{"first_layer": 0, "last_layer": 3, "devices": [0, 1]}]})";
  try {
    ParsePlanJson(bad, "bad.json");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("allreduce_overlap"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dapple
