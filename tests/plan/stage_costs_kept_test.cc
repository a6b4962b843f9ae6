// The replicated stages' figures kept with their sharding decisions (Note [Stage costs kept] in
// shard_memo.h) against the plain evaluation: EvaluatePlan with the memo, and the costs of
// every refinement neighbour evaluated through one shared memo, equal EvaluatePlan without it
// to the last bit, on random problems (fake costs, the analytic model, mixed devices), every
// schedule of one chunk, overlap on and off.
#include <gtest/gtest.h>

#include <iterator>
#include <string>

#include "dapple/plan/dp/dapple_dp.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/planner.h"
#include "dapple/plan/refine/refine_moves.h"
#include "dapple/plan/shard_memo.h"
#include "dapple/schedule/schedule.h"
#include "random_mixed_problems.h"
#include "random_problems.h"

namespace dapple {
namespace {

void ExpectSameCosts(const PlanCosts& a, const PlanCosts& b, const std::string& what) {
  ASSERT_EQ(a.stages.size(), b.stages.size()) << what;
  for (size_t s = 0; s < a.stages.size(); ++s) {
    const StageCost &x = a.stages[s], &y = b.stages[s];
    const std::string at = what + ", stage " + std::to_string(s);
    EXPECT_EQ(x.forward_ms, y.forward_ms) << at;
    EXPECT_EQ(x.backward_ms, y.backward_ms) << at;
    EXPECT_EQ(x.recompute_ms, y.recompute_ms) << at;
    EXPECT_EQ(x.static_bytes, y.static_bytes) << at;
    EXPECT_EQ(x.allreduce_ms, y.allreduce_ms) << at;
    EXPECT_EQ(x.allreduce_exposed_ms, y.allreduce_exposed_ms) << at;
    EXPECT_EQ(x.update_ms, y.update_ms) << at;
    EXPECT_EQ(x.memory_bytes, y.memory_bytes) << at;
    EXPECT_EQ(x.device_memory_bytes, y.device_memory_bytes) << at;
    EXPECT_EQ(x.warmup_depth, y.warmup_depth) << at;
    EXPECT_EQ(x.shard_optimizer, y.shard_optimizer) << at;
  }
  EXPECT_EQ(a.transfer_ms, b.transfer_ms) << what;
  EXPECT_EQ(a.latency.latency_ms, b.latency.latency_ms) << what;
  EXPECT_EQ(a.pivot_stage, b.pivot_stage) << what;
  EXPECT_EQ(a.fits, b.fits) << what;
  EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes) << what;
}

// Stages of `plan` whose figures `memo` holds for EvaluatePlan's arguments.
int KeptStages(const Plan& plan, const ShardMemo& memo) {
  int kept = 0;
  for (int s = 0; s < plan.num_stages(); ++s) {
    const StagePlan& st = plan.stages[s];
    kept += memo.Find(st.first_layer, st.last_layer, st.devices, plan.micro_batch_size,
                      PeakInFlight(plan.schedule, s, plan.num_stages(), plan.num_micro_batches),
                      plan.Recomputes(s), plan.allreduce_overlap) != nullptr;
  }
  return kept;
}

TEST(StageCostsKept, EqualThePlainEvaluation) {
  int checked = 0, kept = 0, sharded = 0;
  for (unsigned seed = 0; seed < 15; ++seed) {
    auto p = testing::MakeRandomProblemOfAnyKind(seed);
    RefineOptions options;
    options.sizes = MicroBatchSizes(p->global_batch);
    options.schedules = {ScheduleKind::kDappleA, ScheduleKind::kZbH1, ScheduleKind::kZbH2};
    options.forward_timed.assign(p->cost->num_layers(), true);
    ShardMemo memo;  // one for the whole problem, as the planner's call shares one
    for (int m : options.sizes) {
      DpOptions o;
      o.micro_batch_size = m;
      o.num_micro_batches = p->global_batch / m;
      o.enforce_memory = false;
      for (const DpCandidate& cand : DappleDp(*p->cost, p->cluster, o)) {
        for (ScheduleKind k : options.schedules) {
          for (bool overlap : {false, true}) {
            Plan base = cand.plan;
            base.schedule = k;
            base.allreduce_overlap = overlap;
            base.global_batch_size = p->global_batch;
            RecomputeWhereNeeded(base, *p->cost, options.forward_timed, nullptr, nullptr, nullptr,
                                 &memo);
            const PlanCosts base_costs = EvaluatePlan(base, *p->cost, &memo);
            ExpectSameCosts(base_costs, EvaluatePlan(base, *p->cost), p->description);
            auto neighbours =
                internal::Neighbours(base, *p->cost, p->cluster, options, &base_costs, &memo);
            auto wide = internal::Neighbours(base, *p->cost, p->cluster, options, &base_costs,
                                             &memo, internal::Moves::kWide);
            std::move(wide.begin(), wide.end(), std::back_inserter(neighbours));
            for (const internal::Neighbour& n : neighbours) {
              ExpectSameCosts(n.costs, EvaluatePlan(n.plan, *p->cost),
                              p->description + ", " + n.move);
              kept += KeptStages(n.plan, memo);
              for (const StagePlan& st : n.plan.stages) sharded += st.shard_optimizer;
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 3000);
  EXPECT_GT(kept, checked / 4);      // the memo's figures are used
  EXPECT_GT(sharded, checked / 20);  // both of them
}

}  // namespace
}  // namespace dapple
