// Each stage's memory choices in a plan: re-computation where it needs it, and the optimizer
// state sharded where that pays. See RecomputeWhereNeeded and ShardWhereItPays in refine.h.
#include <algorithm>

#include "dapple/plan/plan_costs.h"
#include "dapple/plan/recompute_choice.h"
#include "dapple/plan/refine/refine.h"
#include "dapple/schedule/schedule.h"

namespace dapple {

bool RecomputeWhereNeeded(Plan& plan, const CostModel& cost, const std::vector<bool>& forward_timed,
                          PlanCosts* costs, const Plan* base, const PlanCosts* base_costs,
                          ShardMemo* shard_memo, RecomputeMemo* recompute_memo) {
  plan.recompute = false;
  for (StagePlan& st : plan.stages) {
    st.recompute = false;
    st.recompute_layers.clear();
    st.recompute_layer_ids.clear();
  }
  ShardWhereItPays(plan, cost, shard_memo);
  // The replicated stages' figures are the memo's (Note [Stage costs kept]).
  PlanCosts pc = base ? EvaluatePlanFrom(plan, *base, *base_costs, cost, shard_memo)
                      : EvaluatePlan(plan, cost, shard_memo);
  bool any = false;
  for (int s = 0; s < plan.num_stages(); ++s) {
    StagePlan& st = plan.stages[s];
    if (pc.stages[s].fits() || !CanRecompute(forward_timed, st.first_layer, st.last_layer))
      continue;
    if (plan.virtual_stages == 1)
      ChooseStageRecompute(st, cost, plan.micro_batch_size,
                           HeldAtPeaks(plan.schedule, s, plan.num_stages(), plan.num_micro_batches),
                           SplitsBackward(plan.schedule),
                           pc.stages[s].device_memory_bytes - pc.stages[s].static_bytes,
                           forward_timed, recompute_memo);
    else
      st.recompute = true;
    any = true;
  }
  if (costs) *costs = std::move(pc);
  return any;
}

bool ShardWhereItPays(Plan& plan, const CostModel& cost, ShardMemo* memo) {
  bool any = false;
  const int S = plan.num_stages();
  for (int s = 0; s < S; ++s) {
    StagePlan& st = plan.stages[s];
    st.shard_optimizer = false;
    if (st.replicas() < 2 || plan.virtual_stages > 1) continue;
    const int k = PeakInFlight(plan.schedule, s, S, plan.num_micro_batches);
    // Devices of one kind cost alike: EvaluateStage's `uniform` gives the same figures from
    // the first replica and the last (hundreds of replicas on the large clusters).
    auto uniform = [&] {
      return std::all_of(st.devices.begin(), st.devices.end(), [&](int d) {
        return cost.DeviceKind(d) == cost.DeviceKind(st.devices[0]);
      });
    };
    auto evaluate = [&](bool shard, bool alike) {
      return EvaluateStage(cost, st.first_layer, st.last_layer, st.devices, plan.micro_batch_size,
                           k, plan.Recomputes(s), plan.allreduce_overlap, alike, shard);
    };
    if (!memo) {
      const bool alike = uniform();
      st.shard_optimizer = ShardingPays(evaluate(false, alike), evaluate(true, alike));
    } else {
      st.shard_optimizer =
          memo->Pays(st.first_layer, st.last_layer, st.devices, plan.micro_batch_size, k,
                     plan.Recomputes(s), plan.allreduce_overlap, [&] {
                       ShardMemo::Known known;
                       known.uniform = uniform();
                       known.whole = evaluate(false, known.uniform);
                       known.sharded = evaluate(true, known.uniform);
                       known.pays = ShardingPays(known.whole, known.sharded);
                       return known;
                     });
    }
    any = any || st.shard_optimizer;
  }
  return any;
}

}  // namespace dapple
