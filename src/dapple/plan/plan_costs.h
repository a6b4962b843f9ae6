// What a plan costs under a cost model, as the planner sees it: per-stage forward,
// backward and allreduce times, transfers, memory per device and the latency L.
#pragma once

#include <vector>

#include "dapple/common/schedule_kind.h"
#include "dapple/cost/cost_model.h"
#include "dapple/format/plan.h"
#include "dapple/plan/pipeline_latency.h"
#include "dapple/plan/recompute_choice.h"
#include "dapple/plan/stage_cost.h"

namespace dapple {

class ShardMemo;  // shard_memo.h

struct PlanCosts {
  std::vector<StageCost> stages;
  std::vector<double> transfer_ms;    // transfer_ms[s]: from stage s to s+1 (size S-1)
  PipelineLatency latency;            // over the stage list with transfers as stages
  int pivot_stage = 0;                // the compute stage of latency.pivot
  bool fits = true;                   // every stage fits its devices' memory
  double peak_memory_bytes = 0;       // max over stages
  bool uniform_devices = false;       // the plan's devices are alike (EvaluateStage's `uniform`)
  bool transfers_hold_links = false;  // CostModel::TransfersHoldLinks
};

// Samples of the largest replica slice of a micro-batch (SliceOf's first slice).
int SamplesPerReplica(int micro_batch, int replicas);

// Costs of stage [first, last] on `devices` for micro-batches of `micro_batch` samples
// with `warmup_depth` micro-batches in flight; update_ms is the slowest device's update.
// Forward/backward are those of the slowest replica (its slice and its device's speed).
// `allreduce_overlap`: the gradients are allreduced in buckets during the last backward
// (cost/grad_buckets.h). `shard_optimizer` (with 2 or more devices): the stage shards its
// optimizer state.
StageCost EvaluateStage(const CostModel& cost, int first, int last, const std::vector<int>& devices,
                        int micro_batch, int warmup_depth, bool recompute = false,
                        bool allreduce_overlap = false, bool uniform = false,
                        bool shard_optimizer = false);

// Note [Optimizer sharding in the planner] (refine.h): whether a stage costing `whole`
// should rather shard its optimizer state, costing `sharded`: when only that fits, or when it
// fits and its tail (exposed allreduce + update) is shorter.
bool ShardingPays(const StageCost& whole, const StageCost& sharded);

// True when every device computes at the same speed and has the same memory, as the cost
// model says: then a stage's F and B depend only on its layers and its largest slice, and
// EvaluateStage(..., uniform = true) only evaluates the first replica (O(1) cost calls).
bool UniformDevices(const CostModel& cost);

// Every stage of `plan` (stages, micro-batching, schedule, recompute) and L. With chunks
// (virtual_stages v > 1) the stages are the chunks, each holding 1/v of its group's
// in-flight micro-batches (rounded up), and fits / peak_memory_bytes are per device group:
// an estimate, the simulator's peak decides (rescoring.h).
// With `known` (shard_memo.h), a replicated stage's figures are taken from it where it has
// them (Note [Stage costs kept]): the same figures.
PlanCosts EvaluatePlan(const Plan& plan, const CostModel& cost, const ShardMemo* known = nullptr);
// EvaluatePlan(plan, cost) for a plan near `base`, whose EvaluatePlan is `base_costs` (the
// refinement's neighbours of the current plan): with the same micro-batching, schedule,
// overlap and number of stages, one chunk and devices alike in both or neither, a stage
// with base's layers, devices and re-computation at its index costs what base's does, and
// so does a transfer between two stages whose devices and boundary are base's; the rest is
// evaluated. Equal to EvaluatePlan to the last bit (tests/plan/plan_costs_from_test.cc).
PlanCosts EvaluatePlanFrom(const Plan& plan, const Plan& base, const PlanCosts& base_costs,
                           const CostModel& cost, const ShardMemo* known = nullptr);

// Charges the re-computation of stage s of `plan` (one chunk) to `c`, its EvaluateStage:
// per-layer re-computation's extra forward, and with either kind the activations the stage
// holds as HeldAtPeaks counts them (Note [Re-computation per layer] in the runtime's
// recompute_segments.cc). A whole stage without a split backward is EvaluateStage's already.
void ChargeRecompute(const CostModel& cost, const Plan& plan, int s, StageCost& c);
// The same for a stage `st` (all of it re-computing when `whole`, else its recompute_layers)
// of slices of `micro_batch` that holds `held` at its peaks (HeldAtPeaks), known before its
// plan is.
void ChargeStageRecompute(const CostModel& cost, const StagePlan& st, bool whole, int micro_batch,
                          const std::vector<HeldMicroBatches>& held, bool split, StageCost& c);

// Whether stage [first, last] may re-compute: re-computation costs the stage's forward
// again, so the profile must time it. `forward_timed[l]`: layer l has a forward time in
// the profile (ForwardTimed); a stage may when one of its layers has. Empty: never.
bool CanRecompute(const std::vector<bool>& forward_timed, int first, int last);

// Lower bound of the simulated iteration time: every replica of stage s runs M forwards
// and backwards, then the allreduce, then the update, so time >= max_s M (F_s + B_s) +
// AR_s + U_s (with overlap, the exposed part of AR_s).
// I + W of the slowest replica of a stage (the backward of the split schedules, zb-h1).
double SplitBackwardMs(const CostModel& cost, int first, int last, const std::vector<int>& devices,
                       int micro_batch);

double IterationLowerBound(const PlanCosts& costs, int num_micro_batches);

// Another lower bound of the simulated iteration time, through the pipeline: stage s
// cannot start before the first micro-batch's forwards and transfers before it,
// sum_{k<s} (F_k + T_k), then its slowest replica is busy M (F_s + B_s), and then come its
// own allreduce (the exposed part) and update, and (unless the backward is split into I
// and W, whose last W need not come last) the gradient of its last backward still passes
// every stage before it, sum_{k<s} B_k, before stage 0's allreduce and update. Where the
// transfers hold links (PlanCosts::transfers_hold_links), the M activations into stage s
// cross its boundary one after another, the first after sum_{k<s} F_k + sum_{k<s-1} T_k,
// and the last of them still passes stage s's forward and backward and what follows that
// (as above). The maximum over s. For a V plan, the maximum over its groups of the first
// micro-batch's way to the group and M times its two chunks' F + B (Note [A V plan's
// pipeline bound] in plan_costs.cc); 0 for interleaved plans. Used to skip simulations that
// cannot win.
double PipelineLowerBound(const Plan& plan, const PlanCosts& costs);

}  // namespace dapple
