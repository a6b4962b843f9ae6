// EvaluatePlanFrom (plan_costs.h) equals EvaluatePlan to the last bit: the refinement
// evaluates each neighbour from the current plan's costs, reusing the stages and transfers
// it did not change. On every refinement neighbour of the DP's candidates of random
// problems (fake costs, the analytic model, mixed devices), with every schedule, overlap on
// and off, and re-computation where a stage needs it; and Neighbours gives the same costs
// with the current plan's costs as without, and with one ShardMemo shared by all (whose kept
// figures, Note [Stage costs kept] in shard_memo.h, EvaluatePlan takes too).
#include <gtest/gtest.h>

#include <iterator>

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
    EXPECT_EQ(x.forward_ms, y.forward_ms) << what << ", stage " << s;
    EXPECT_EQ(x.backward_ms, y.backward_ms) << what << ", stage " << s;
    EXPECT_EQ(x.recompute_ms, y.recompute_ms) << what << ", stage " << s;
    EXPECT_EQ(x.static_bytes, y.static_bytes) << what << ", stage " << s;
    EXPECT_EQ(x.shard_optimizer, y.shard_optimizer) << what << ", stage " << s;
    EXPECT_EQ(x.allreduce_ms, y.allreduce_ms) << what << ", stage " << s;
    EXPECT_EQ(x.allreduce_exposed_ms, y.allreduce_exposed_ms) << what << ", stage " << s;
    EXPECT_EQ(x.update_ms, y.update_ms) << what << ", stage " << s;
    EXPECT_EQ(x.memory_bytes, y.memory_bytes) << what << ", stage " << s;
    EXPECT_EQ(x.device_memory_bytes, y.device_memory_bytes) << what << ", stage " << s;
    EXPECT_EQ(x.warmup_depth, y.warmup_depth) << what << ", stage " << s;
  }
  EXPECT_EQ(a.transfer_ms, b.transfer_ms) << what;
  EXPECT_EQ(a.latency.latency_ms, b.latency.latency_ms) << what;
  EXPECT_EQ(a.latency.pivot, b.latency.pivot) << what;
  EXPECT_EQ(a.pivot_stage, b.pivot_stage) << what;
  EXPECT_EQ(a.fits, b.fits) << what;
  EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes) << what;
  EXPECT_EQ(a.uniform_devices, b.uniform_devices) << what;
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

TEST(EvaluatePlanFrom, EqualsEvaluatePlanOnEveryNeighbour) {
  int checked = 0, reused = 0, kept = 0, sharded = 0;
  for (unsigned seed = 0; seed < 18; ++seed) {
    auto p = testing::MakeRandomProblemOfAnyKind(seed);
    ShardMemo memo;  // one for the whole problem, as a planner's call shares one
    RefineOptions options;
    options.sizes = MicroBatchSizes(p->global_batch);
    options.schedules = {ScheduleKind::kDappleA, ScheduleKind::kDappleB, ScheduleKind::kZbH1};
    options.forward_timed.assign(p->cost->num_layers(), true);
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
            RecomputeWhereNeeded(base, *p->cost, options.forward_timed);
            const PlanCosts base_costs = EvaluatePlan(base, *p->cost);
            auto alone = internal::Neighbours(base, *p->cost, p->cluster, options);
            auto from = internal::Neighbours(base, *p->cost, p->cluster, options, &base_costs);
            auto shared =
                internal::Neighbours(base, *p->cost, p->cluster, options, &base_costs, &memo);
            for (auto* list : {&alone, &from, &shared}) {  // the wide moves too
              auto wide = internal::Neighbours(
                  base, *p->cost, p->cluster, options, list == &alone ? nullptr : &base_costs,
                  list == &shared ? &memo : nullptr, internal::Moves::kWide);
              std::move(wide.begin(), wide.end(), std::back_inserter(*list));
            }
            ASSERT_EQ(alone.size(), from.size()) << p->description;
            ASSERT_EQ(alone.size(), shared.size()) << p->description;
            for (size_t i = 0; i < alone.size(); ++i) {
              const std::string what = p->description + ", " + alone[i].move;
              const Plan& n = alone[i].plan;
              const PlanCosts whole = EvaluatePlan(n, *p->cost);
              const PlanCosts near = EvaluatePlanFrom(n, base, base_costs, *p->cost);
              ExpectSameCosts(near, whole, what);
              ExpectSameCosts(from[i].costs, alone[i].costs, what + " (Neighbours)");
              ExpectSameCosts(shared[i].costs, whole, what + " (shared memo)");
              ExpectSameCosts(EvaluatePlan(n, *p->cost, &memo), whole, what + " (kept)");
              kept += KeptStages(n, memo);
              for (const StagePlan& st : n.stages) sharded += st.shard_optimizer;
              reused += n.num_stages() == base.num_stages() &&
                        n.micro_batch_size == base.micro_batch_size && n.schedule == k;
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 5000);
  EXPECT_GT(reused, checked / 4);    // most neighbours keep the frame, so stages are reused
  EXPECT_GT(kept, checked / 4);      // the memo's figures are taken
  EXPECT_GT(sharded, checked / 20);  // of both kinds
}

}  // namespace
}  // namespace dapple
