// Plan costs for the planners: see plan_costs.h.
#include "dapple/plan/plan_costs.h"

#include <algorithm>

#include "dapple/common/error.h"
#include "dapple/common/slicing.h"
#include "dapple/cost/grad_buckets.h"
#include "dapple/cost/recompute_costs.h"
#include "dapple/plan/recompute_choice.h"
#include "dapple/plan/shard_memo.h"
#include "dapple/schedule/schedule.h"

namespace dapple {

int SamplesPerReplica(int micro_batch, int replicas) {
  return static_cast<int>(SliceOf(micro_batch, replicas, 0).size());
}

StageCost EvaluateStage(const CostModel& cost, int first, int last, const std::vector<int>& devices,
                        int micro_batch, int warmup_depth, bool recompute, bool allreduce_overlap,
                        bool uniform, bool shard_optimizer) {
  DAPPLE_CHECK(!devices.empty() && micro_batch >= 1);
  StageCost c;
  const int r = static_cast<int>(devices.size());
  const bool shard = shard_optimizer && r > 1;
  c.shard_optimizer = shard;
  c.device_memory_bytes = 1e300;
  for (int j = 0; j < (uniform ? 1 : r); ++j) {
    double samples = static_cast<double>(SliceOf(micro_batch, r, j).size());
    if (samples <= 0) continue;
    // A replica alike the one before (same kind, same slice) costs the same.
    if (j > 0 && cost.DeviceKind(devices[j]) == cost.DeviceKind(devices[j - 1]) &&
        SliceOf(micro_batch, r, j - 1).size() == SliceOf(micro_batch, r, j).size())
      continue;
    double f = cost.ForwardMs(first, last, samples, devices[j]);
    double b = cost.BackwardMs(first, last, samples, devices[j]);
    c.forward_ms = std::max(c.forward_ms, f);
    c.backward_ms = std::max(c.backward_ms, recompute ? b + f : b);
    c.device_memory_bytes = std::min(c.device_memory_bytes, cost.DeviceMemoryBytes(devices[j]));
  }
  // Every replica updates the whole stage, even one with an empty slice.
  for (int j = 0; j < (uniform ? 1 : r); ++j)
    if (j == 0 || cost.DeviceKind(devices[j]) != cost.DeviceKind(devices[j - 1]))
      c.update_ms = std::max(c.update_ms, cost.UpdateMs(first, last, devices[j]));
  // Sharded: each replica updates 1/r of the parameters, then the all-gather follows.
  if (shard) c.update_ms = c.update_ms / r + cost.AllGatherMs(first, last, devices);
  c.allreduce_ms = r == 1  ? 0.0
                   : shard ? cost.ReduceScatterMs(first, last, devices)
                           : cost.AllReduceMs(first, last, devices);
  c.allreduce_exposed_ms = c.allreduce_exposed_split_ms = c.allreduce_ms;
  if (allreduce_overlap && r > 1) {
    std::vector<GradBucket> buckets = GradientBuckets(cost, first, last);
    std::vector<double> ms = BucketAllReduceMs(cost, buckets, devices, shard);
    for (int j = 0; j < r; ++j) {
      // On uniform devices a replica's figure depends only on its slice, and slices come
      // in two sizes: the first replica's and the last's, one size when r divides m.
      if (uniform && j > 0 && (j < r - 1 || micro_batch % r == 0)) continue;
      const double samples = static_cast<double>(SliceOf(micro_batch, r, j).size());
      const double e = ExposedAllReduceMs(cost, buckets, ms, samples, devices[j]);
      const double w = ExposedAllReduceMs(cost, buckets, ms, samples, devices[j], true);
      c.allreduce_exposed_ms = j == 0 ? e : std::min(c.allreduce_exposed_ms, e);
      c.allreduce_exposed_split_ms = j == 0 ? w : std::min(c.allreduce_exposed_split_ms, w);
    }
  }
  const double s = SamplesPerReplica(micro_batch, r);
  c.warmup_depth = warmup_depth;
  if (recompute) c.recompute_ms = c.forward_ms;
  // A micro-batch holds the stage's input and every layer's output (RecomputeBytes); with
  // re-computation only the input, and one backward rebuilds the rest.
  const double input = cost.StageInputBytes(first, s);
  const double act = cost.ActivationBytes(first, last, s);
  c.static_bytes =
      shard ? cost.ShardedStaticMemoryBytes(first, last, r) : cost.StaticMemoryBytes(first, last);
  c.memory_bytes =
      c.static_bytes + (recompute ? warmup_depth * input + act : warmup_depth * (input + act));
  return c;
}

bool ShardingPays(const StageCost& whole, const StageCost& sharded) {
  return sharded.fits() && (!whole.fits() || sharded.allreduce_exposed_ms + sharded.update_ms <
                                                 whole.allreduce_exposed_ms + whole.update_ms);
}

double SplitBackwardMs(const CostModel& cost, int first, int last, const std::vector<int>& devices,
                       int micro_batch) {
  double ms = 0;
  const int r = static_cast<int>(devices.size());
  for (int j = 0; j < r; ++j) {
    const double n = static_cast<double>(SliceOf(micro_batch, r, j).size());
    if (n <= 0) continue;
    ms = std::max(ms, cost.BackwardInputMs(first, last, n, devices[j]) +
                          cost.BackwardWeightMs(first, last, n, devices[j]));
  }
  return ms;
}

namespace {

// Whether `base`'s costs may stand in for `plan`'s stage by stage (EvaluatePlanFrom): the
// same micro-batching, schedule, overlap and number of stages (so the same warm-up depth
// per index), one chunk, and devices alike in both or in neither.
bool SameFrame(const Plan& plan, const Plan& base, const PlanCosts& base_costs, bool uniform) {
  return plan.micro_batch_size == base.micro_batch_size &&
         plan.num_micro_batches == base.num_micro_batches && plan.schedule == base.schedule &&
         plan.allreduce_overlap == base.allreduce_overlap && plan.virtual_stages == 1 &&
         base.virtual_stages == 1 && plan.num_stages() == base.num_stages() &&
         static_cast<int>(base_costs.stages.size()) == base.num_stages() &&
         base_costs.uniform_devices == uniform;
}

// Stage s of `plan` costs what stage s of `base` does: same layers, devices, re-computation,
// optimizer sharding.
bool SameStage(const Plan& plan, const Plan& base, int s) {
  const StagePlan &a = plan.stages[s], &b = base.stages[s];
  return a.first_layer == b.first_layer && a.last_layer == b.last_layer &&
         plan.Recomputes(s) == base.Recomputes(s) && a.recompute_layers == b.recompute_layers &&
         a.devices == b.devices && a.shard_optimizer == b.shard_optimizer;
}

// Whether the plan's devices are alike (UniformDevices over them only): then each stage is
// costed from its first replica and its last (EvaluateStage's `uniform`). Devices of one
// kind (CostModel::DeviceKind) are alike without asking.
bool PlanDevicesAlike(const Plan& plan, const CostModel& cost) {
  bool uniform = true;
  const int d0 = plan.stages[0].devices.at(0), n = cost.num_layers() - 1;
  const double pbs = cost.profile_batch_size();
  for (const StagePlan& st : plan.stages)
    for (int d : st.devices)
      uniform = uniform && (d == d0 || cost.DeviceKind(d) == cost.DeviceKind(d0) ||
                            (cost.ForwardMs(0, n, pbs, d) == cost.ForwardMs(0, n, pbs, d0) &&
                             cost.BackwardMs(0, n, pbs, d) == cost.BackwardMs(0, n, pbs, d0) &&
                             cost.UpdateMs(0, n, d) == cost.UpdateMs(0, n, d0) &&
                             cost.DeviceMemoryBytes(d) == cost.DeviceMemoryBytes(d0)));
  return uniform;
}

// Stage s of `plan` costed afresh, or taken from `known` where it has the same arguments.
StageCost EvaluatePlanStage(const Plan& plan, const CostModel& cost, int s, bool uniform,
                            const ShardMemo* known) {
  const StagePlan& st = plan.stages[s];
  const int S = plan.num_stages(), M = plan.num_micro_batches;
  const int v = plan.virtual_stages, G = plan.num_device_groups();
  // Interleaved (v chunks per device group, G groups): chunk s holds about 1/v of its
  // group's K_g chunk-micro-batches, a group's peak shared evenly among its chunks.
  int k = v > 1 ? (PeakInFlight(plan.schedule, plan.GroupOf(s), G, M, v) + v - 1) / v
                : PeakInFlight(plan.schedule, s, S, M);
  const ShardMemo::Known* kept =
      known && v == 1 && st.replicas() > 1
          ? known->Find(st.first_layer, st.last_layer, st.devices, plan.micro_batch_size, k,
                        plan.Recomputes(s), plan.allreduce_overlap)
          : nullptr;
  if (kept && kept->uniform != uniform) kept = nullptr;  // other arguments
  StageCost c = kept ? (st.shard_optimizer ? kept->sharded : kept->whole)
                     : EvaluateStage(cost, st.first_layer, st.last_layer, st.devices,
                                     plan.micro_batch_size, k, plan.Recomputes(s),
                                     plan.allreduce_overlap, uniform, st.shard_optimizer);
  if (v == 1 && plan.RecomputesAny(s)) ChargeRecompute(cost, plan, s, c);
  if (SplitsBackward(plan.schedule)) {
    // The backward runs as I + W, which may cost more than B (the profile times them
    // apart). The buckets start during the last W, which is the stage's last compute (every
    // F and I has a W after it): with one chunk per device what no W can hide is
    // allreduce_exposed_split_ms; with chunks no hiding is assumed, so lower bounds stay
    // valid.
    c.backward_ms =
        SplitBackwardMs(cost, st.first_layer, st.last_layer, st.devices, plan.micro_batch_size) +
        c.recompute_ms;
    c.allreduce_exposed_ms = v == 1 ? c.allreduce_exposed_split_ms : 0;
  }
  return c;
}

// With chunks, fits and peak memory per device group: the sum of its chunks'.
void ChargeGroupMemory(const Plan& plan, PlanCosts& pc) {
  pc.fits = true;
  pc.peak_memory_bytes = 0;
  for (int g = 0; g < plan.num_device_groups(); ++g) {
    double group = 0;
    for (int s = 0; s < plan.num_stages(); ++s)
      if (plan.GroupOf(s) == g) group += pc.stages[s].memory_bytes;
    pc.fits = pc.fits && group <= pc.stages[g].device_memory_bytes;
    pc.peak_memory_bytes = std::max(pc.peak_memory_bytes, group);
  }
}

PlanCosts Evaluate(const Plan& plan, const CostModel& cost, const Plan* base,
                   const PlanCosts* base_costs, const ShardMemo* known) {
  PlanCosts pc;
  const int S = plan.num_stages();
  const int M = plan.num_micro_batches;
  DAPPLE_CHECK(S > 0 && M >= 1);
  std::vector<LatencyStage> compute;
  compute.reserve(S);
  pc.stages.reserve(S);
  pc.transfer_ms.reserve(S - 1);
  const bool uniform = PlanDevicesAlike(plan, cost);
  pc.uniform_devices = uniform;
  pc.transfers_hold_links = cost.TransfersHoldLinks();
  const bool reuse = base && SameFrame(plan, *base, *base_costs, uniform);
  // The transfer from stage s depends on its last layer, m and both stages' devices.
  auto transfer = [&](int s) {
    const StagePlan &a = plan.stages[s], &b = plan.stages[s + 1];
    if (reuse && a.last_layer == base->stages[s].last_layer &&
        a.devices == base->stages[s].devices && b.devices == base->stages[s + 1].devices)
      return base_costs->transfer_ms[s];
    return cost.TransferMs(a.last_layer, plan.micro_batch_size, a.devices, b.devices);
  };
  for (int s = 0; s < S; ++s) {
    const StageCost c = reuse && SameStage(plan, *base, s)
                            ? base_costs->stages[s]
                            : EvaluatePlanStage(plan, cost, s, uniform, known);
    pc.fits = pc.fits && c.fits();
    pc.peak_memory_bytes = std::max(pc.peak_memory_bytes, c.memory_bytes);
    compute.push_back({c.forward_ms, c.backward_ms, c.allreduce_ms, c.update_ms});
    pc.stages.push_back(c);
    if (s + 1 < S) pc.transfer_ms.push_back(transfer(s));
  }
  if (plan.virtual_stages > 1) ChargeGroupMemory(plan, pc);
  pc.latency = ComputeLatency(WithTransfers(compute, pc.transfer_ms), M);
  pc.pivot_stage = ComputeStageOf(pc.latency.pivot);
  return pc;
}

}  // namespace

PlanCosts EvaluatePlan(const Plan& plan, const CostModel& cost, const ShardMemo* known) {
  return Evaluate(plan, cost, nullptr, nullptr, known);
}

PlanCosts EvaluatePlanFrom(const Plan& plan, const Plan& base, const PlanCosts& base_costs,
                           const CostModel& cost, const ShardMemo* known) {
  return Evaluate(plan, cost, &base, &base_costs, known);
}

bool UniformDevices(const CostModel& cost) {
  const int n = cost.num_layers() - 1;
  const double pbs = cost.profile_batch_size();
  for (int d = 1; d < cost.num_devices(); ++d) {
    if (cost.ForwardMs(0, n, pbs, d) != cost.ForwardMs(0, n, pbs, 0) ||
        cost.BackwardMs(0, n, pbs, d) != cost.BackwardMs(0, n, pbs, 0) ||
        cost.UpdateMs(0, n, d) != cost.UpdateMs(0, n, 0) ||
        cost.DeviceMemoryBytes(d) != cost.DeviceMemoryBytes(0))
      return false;
  }
  return true;
}

void ChargeRecompute(const CostModel& cost, const Plan& plan, int s, StageCost& c) {
  ChargeStageRecompute(cost, plan.stages[s], plan.Recomputes(s), plan.micro_batch_size,
                       HeldAtPeaks(plan.schedule, s, plan.num_stages(), plan.num_micro_batches),
                       SplitsBackward(plan.schedule), c);
}

void ChargeStageRecompute(const CostModel& cost, const StagePlan& st, bool whole, int micro_batch,
                          const std::vector<HeldMicroBatches>& held, bool split, StageCost& c) {
  if (whole && !split) return;
  std::vector<int> layers = st.recompute_layers;
  if (whole) {
    layers.clear();
    for (int l = st.first_layer; l <= st.last_layer; ++l) layers.push_back(l);
  }
  const int r = st.replicas();
  if (!whole) {
    double extra = 0;
    for (int j = 0; j < r; ++j) {
      const double n = static_cast<double>(SliceOf(micro_batch, r, j).size());
      if (n > 0) extra = std::max(extra, RecomputeForwardMs(cost, layers, n, st.devices[j]));
    }
    c.recompute_ms = extra;
    c.backward_ms += extra;
  }
  const double samples = SamplesPerReplica(micro_batch, r);
  const RecomputeBytes bytes =
      RecomputeActivationBytes(cost, st.first_layer, st.last_layer, layers, samples);
  c.memory_bytes = c.static_bytes + HeldActivationBytes(bytes, held, split);
}

bool CanRecompute(const std::vector<bool>& forward_timed, int first, int last) {
  if (forward_timed.empty()) return false;
  for (int l = first; l <= last; ++l)
    if (forward_timed[l]) return true;
  return false;
}

namespace {

// Note [A V plan's pipeline bound]: every device of group g computes its two chunks' M
// micro-batches one at a time (the slowest replica of each chunk, the same device for both
// where a layer's compute grows with its slice and shrinks with the device's speed alike for
// every layer, as the cost models have it), and none before micro-batch 0 has come forward
// through the chunks before chunk g and their transfers.
double VPipelineLowerBound(const Plan& plan, const PlanCosts& costs) {
  const int S = plan.num_device_groups(), M = plan.num_micro_batches;
  double lb = 0, start = 0;  // sum_{k<g} (F_k + T_k)
  for (int g = 0; g < S; ++g) {
    const StageCost &down = costs.stages[g], &up = costs.stages[2 * S - 1 - g];
    lb = std::max(
        lb, start + M * (down.forward_ms + down.backward_ms + up.forward_ms + up.backward_ms));
    start += down.forward_ms + costs.transfer_ms[g];
  }
  return lb;
}

}  // namespace

double PipelineLowerBound(const Plan& plan, const PlanCosts& costs) {
  if (plan.virtual_stages == 2 && VShaped(plan.schedule)) return VPipelineLowerBound(plan, costs);
  if (plan.virtual_stages > 1) return 0;
  const bool split = SplitsBackward(plan.schedule);
  const int M = plan.num_micro_batches;
  auto tail = [](const StageCost& c) { return c.allreduce_exposed_ms + c.update_ms; };
  const double first_tail = costs.stages.empty() ? 0.0 : tail(costs.stages[0]);
  double lb = 0, start = 0, back = 0;  // sum_{k<s} (F_k + T_k); sum_{k<s} B_k unless split
  for (size_t s = 0; s < costs.stages.size(); ++s) {
    const StageCost& c = costs.stages[s];
    // After its last backward, the stage's own allreduce and update; unless split, the
    // last gradient's way back to stage 0, then stage 0's.
    const double after = std::max(tail(c), split ? 0.0 : back + first_tail);
    lb = std::max(lb, start + M * (c.forward_ms + c.backward_ms) + after);
    // The boundary into s: its first activation arrives at `start`, the others one
    // transfer each after it.
    if (s > 0 && costs.transfers_hold_links)
      lb = std::max(
          lb, start + (M - 1) * costs.transfer_ms[s - 1] + c.forward_ms + c.backward_ms + after);
    start += c.forward_ms;
    if (!split) back += c.backward_ms;
    if (s < costs.transfer_ms.size()) start += costs.transfer_ms[s];
  }
  return lb;
}

double IterationLowerBound(const PlanCosts& costs, int num_micro_batches) {
  double lb = 0;
  for (const StageCost& c : costs.stages)
    lb = std::max(lb, num_micro_batches * (c.forward_ms + c.backward_ms) + c.allreduce_exposed_ms +
                          c.update_ms);
  return lb;
}

}  // namespace dapple
