// The refinement after the DP (refine.h): it finds PipeDream's own plan for GNMT-16 on
// paper-b or a faster one, never returns a plan slower than its start, keeps plans valid,
// and proposes re-computation exactly where a plan needs it to fit.
#include "dapple/plan/refine/refine.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "dapple/cost/analytic_cost_model.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/planner.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"

namespace dapple {
namespace {

// PipeDream's planner (optimizer_graph_hierarchical.py of msr-fiddle/pipedream, run on
// gnmt-16-pbs-64.txt with 16 machines at 3.125 GB/s) splits GNMT-16 into 14 stages, the
// 13th with 3 replicas (1:1:...:1:3:1). Its stages as first and last layer ids; its
// zero-cost input nodes (node3, node63) join the contiguous range around them.
struct HandStage {
  const char* first;
  const char* last;
  int replicas;
};
constexpr HandStage kPipeDreamGnmt16[] = {
    {"node1", "node5", 1},   {"node6", "node10", 1},  {"node11", "node20", 1},
    {"node21", "node30", 1}, {"node31", "node3", 1},  {"node41", "node47", 1},
    {"node48", "node55", 1}, {"node56", "node57", 1}, {"node58", "node70", 1},
    {"node71", "node71", 1}, {"node72", "node82", 1}, {"node83", "node89", 1},
    {"node90", "node92", 3}, {"node93", "node96", 1}};

TEST(Refine, Gnmt16OnPaperBIsAtLeastAsFastAsPipeDreamsPlan) {
  const std::filesystem::path path =
      std::filesystem::path(DAPPLE_DATA_DIR) / "profiles" / "dapple" / "gnmt-16-pbs-64.txt";
  Profile profile = LoadProfile(path);
  Cluster cluster = ClusterPreset("paper-b");
  AnalyticCostModel cost(profile, cluster);
  const int gbs = 1024;

  // The reference: PipeDream's plan built by hand, its best micro-batch size and DAPPLE
  // schedule, scored by the simulator.
  Plan hand;
  hand.planner = "hand";
  hand.global_batch_size = gbs;
  hand.allreduce_overlap = false;
  int device = 0;
  for (const HandStage& h : kPipeDreamGnmt16) {
    StagePlan s;
    s.first_layer = s.last_layer = -1;
    s.first_layer_id = h.first;
    s.last_layer_id = h.last;
    for (int r = 0; r < h.replicas; ++r) s.devices.push_back(device++);
    hand.stages.push_back(s);
  }
  ASSERT_EQ(device, 16);
  ResolvePlanLayers(hand, profile, "pipedream");
  double reference = 1e300;
  for (int m : {4, 8, 16, 32}) {
    for (ScheduleKind k : {ScheduleKind::kDappleA, ScheduleKind::kDappleB}) {
      hand.micro_batch_size = m;
      hand.num_micro_batches = gbs / m;
      hand.schedule = k;
      ValidatePlan(hand, profile, cluster, "pipedream");
      reference = std::min(reference, SimulatePlan(hand, cost).iteration_ms);
    }
  }
  ASSERT_LT(reference, 380);  // about 355 ms, 11.2x

  PlannerOptions o;
  o.allreduce_overlap = false;
  PlanResult r = RunPlanner(profile, cluster, cost, gbs, o);
  ASSERT_TRUE(r.plan) << r.reason;
  EXPECT_FALSE(r.refine_out_of_budget);
  EXPECT_NO_THROW(ValidatePlan(*r.plan, profile, cluster, "planner"));
  const double planned = SimulatePlan(*r.plan, cost).iteration_ms;
  EXPECT_DOUBLE_EQ(planned, r.plan->estimate->iteration_ms);
  EXPECT_LE(planned, reference * (1 + 1e-9)) << "refined by " << r.refine_moves.size();
  EXPECT_FALSE(r.refine_moves.empty());  // the DP alone finds 424 ms

  // Without refinement the planner stays where the DP and the baselines leave it.
  o.refine_work = 0;
  PlanResult plain = RunPlanner(profile, cluster, cost, gbs, o);
  ASSERT_TRUE(plain.plan);
  EXPECT_GT(plain.plan->estimate->iteration_ms, reference);
}

// A problem on the fake cost model: `layers` layers of 1 ms forward, 2 ms backward.
struct Fake {
  Fake(int layers, int devices) : cost(layers, devices) {
    cluster.name = "fake";
    cluster.servers.assign(devices, ServerSpec{1, std::nullopt});
    profile.model = "fake";
    profile.batch_size = 1;
    for (int i = 0; i < layers; ++i) {
      LayerProfile l;
      l.id = "l" + std::to_string(i);
      l.forward_ms = 1;
      l.backward_ms = 2;
      profile.layers.push_back(l);
    }
  }
  PlanResult Plan(int gbs) { return RunPlanner(profile, cluster, cost, gbs, PlannerOptions{}); }
  Profile profile;
  Cluster cluster;
  FakeCostModel cost;
};

// Every re-computing stage of `plan` needs it: without it the plan does not fit.
void ExpectRecomputeOnlyWhereNeeded(const dapple::Plan& plan, const CostModel& cost) {
  for (int s = 0; s < plan.num_stages(); ++s) {
    if (!plan.stages[s].recompute) continue;
    dapple::Plan off = plan;
    off.stages[s].recompute = false;
    bool fits = EvaluatePlan(off, cost).fits;
    SimResult r = SimulatePlan(off, cost);
    for (const DeviceStats& d : r.devices)
      fits = fits && d.peak_memory_bytes <= cost.DeviceMemoryBytes(d.device);
    EXPECT_FALSE(fits) << "stage " << s << " re-computes without need";
  }
}

// 8 layers of 10 MB activations per sample, no parameters, `mb` MB per device, GBS 4. A
// stage of c layers after the first holding K micro-batches of one sample needs 10 (c + 1) K
// MB without re-computation (its input and its layers' outputs) and 10 K + 10 c MB with it
// (its input per micro-batch, plus one micro-batch's outputs); the first stage's input (the
// model's) is free. The last stage has K = 1, the one before K = 2, and so on.
Fake MemoryBound(int devices, double mb) {
  Fake f(8, devices);
  f.cost.act_bytes.assign(8, 10e6);
  f.cost.param_bytes.assign(8, 0);
  f.cost.memory_bytes = mb * 1e6 + 1;
  return f;
}

TEST(Refine, RecomputationWhenOnlyPlansWithItFit) {
  // Two devices, 50 MB: without re-computation stage 0 takes at most 2 layers (K = 2) and
  // stage 1 at most 4, and one stage of 8 layers holds 80 MB, so nothing fits; with it,
  // both do (per layer: one stage keeping one layer's 10 MB and rebuilding at most 4 layers).
  Fake f = MemoryBound(2, 50);
  Fake g = f;  // without forward times re-computation cannot be costed
  for (LayerProfile& l : g.profile.layers) l.forward_ms = 0;
  EXPECT_FALSE(g.Plan(4).plan);
  PlannerOptions ex;
  ex.planner = PlannerKind::kExhaustive;  // the reference: no plan fits without re-computation
  EXPECT_FALSE(RunPlanner(g.profile, g.cluster, g.cost, 4, ex).plan);
  // With it, the exhaustive planner's plan (the optimum) is the planner's.
  PlanResult best = RunPlanner(f.profile, f.cluster, f.cost, 4, ex);
  ASSERT_TRUE(best.plan);

  PlanResult with = f.Plan(4);
  ASSERT_TRUE(with.plan) << with.reason;
  const dapple::Plan& p = *with.plan;
  EXPECT_TRUE(p.AnyRecompute());
  ExpectRecomputeOnlyWhereNeeded(p, f.cost);
  EXPECT_DOUBLE_EQ(p.estimate->iteration_ms, best.plan->estimate->iteration_ms);
  SimResult r = SimulatePlan(p, f.cost);
  for (const DeviceStats& d : r.devices) EXPECT_LE(d.peak_memory_bytes, f.cost.memory_bytes);
}

TEST(Refine, RecomputationOnlyWhenItPays) {
  // Plenty of memory: re-computation only costs time.
  Fake roomy(8, 3);
  PlanResult free = roomy.Plan(4);
  ASSERT_TRUE(free.plan);
  EXPECT_FALSE(free.plan->AnyRecompute());
  // Three devices, 60 MB: without re-computation stages of at most 2, 2 and 5 layers fit
  // (60, 60, 60 MB), so the slowest stage has 3 layers or more; with it, 3 + 3 + 2 do.
  Fake f = MemoryBound(3, 60);
  Fake g = f;
  for (LayerProfile& l : g.profile.layers) l.forward_ms = 0;
  PlanResult plain = g.Plan(4);
  ASSERT_TRUE(plain.plan) << plain.reason;
  EXPECT_FALSE(plain.plan->AnyRecompute());
  PlanResult tight = f.Plan(4);
  ASSERT_TRUE(tight.plan) << tight.reason;
  EXPECT_TRUE(tight.plan->AnyRecompute());
  EXPECT_LT(tight.plan->estimate->iteration_ms, plain.plan->estimate->iteration_ms);
  ExpectRecomputeOnlyWhereNeeded(*tight.plan, f.cost);
  // The reference for the plan without it: the exhaustive planner's.
  PlannerOptions ex;
  ex.planner = PlannerKind::kExhaustive;
  PlanResult best = RunPlanner(g.profile, g.cluster, g.cost, 4, ex);
  ASSERT_TRUE(best.plan);
  EXPECT_LT(tight.plan->estimate->iteration_ms, best.plan->estimate->iteration_ms);
}

TEST(Refine, NeverSlowerThanItsStartAndValid) {
  Fake f(10, 6);
  f.cost.transfer_ms = 0.4;
  f.cost.allreduce_ms = 3;
  f.cost.fwd_ms = {1, 3, 1, 1, 5, 1, 1, 2, 1, 1};
  f.cost.bwd_ms = {2, 6, 2, 2, 9, 2, 2, 4, 2, 1};
  for (size_t i = 0; i < f.profile.layers.size(); ++i)
    f.profile.layers[i].forward_ms = f.cost.fwd_ms[i];
  // Start: the straight pipeline on 5 of the 6 devices, m = 2.
  Plan start;
  start.global_batch_size = 16;
  start.micro_batch_size = 2;
  start.num_micro_batches = 8;
  start.schedule = ScheduleKind::kDappleA;
  for (int s = 0; s < 5; ++s) start.stages.push_back(StagePlan{2 * s, 2 * s + 1, "", "", {s}});
  Selection sel = SelectFastest({Proposal{start, "hand"}}, f.cost);
  ASSERT_TRUE(sel.best);
  RefineOptions o;
  o.sizes = MicroBatchSizes(16);
  o.schedules = {ScheduleKind::kDappleA, ScheduleKind::kDappleB};
  o.forward_timed.assign(10, true);
  RefineResult r = Refine({*sel.best}, f.cost, f.cluster, o);
  EXPECT_FALSE(r.out_of_budget);
  EXPECT_LT(r.best.sim.iteration_ms, sel.best->sim.iteration_ms);
  EXPECT_FALSE(r.steps.empty());
  for (size_t i = 1; i < r.steps.size(); ++i)
    EXPECT_LT(r.steps[i].iteration_ms, r.steps[i - 1].iteration_ms);
  EXPECT_DOUBLE_EQ(r.steps.back().iteration_ms, r.best.sim.iteration_ms);
  EXPECT_NO_THROW(ValidatePlan(r.best.plan, f.profile, f.cluster, "refined"));
  EXPECT_DOUBLE_EQ(SimulatePlan(r.best.plan, f.cost).iteration_ms, r.best.sim.iteration_ms);
  EXPECT_EQ(r.best.origin, "hand");
  // With no budget the start comes back unchanged.
  o.max_work = 0;
  RefineResult none = Refine({*sel.best}, f.cost, f.cluster, o);
  EXPECT_TRUE(none.steps.empty());
  EXPECT_DOUBLE_EQ(none.best.sim.iteration_ms, sel.best->sim.iteration_ms);
}

}  // namespace
}  // namespace dapple
