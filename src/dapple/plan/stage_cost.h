// One stage's costs as the planner sees them (EvaluateStage in plan_costs.h): its forward,
// backward, allreduce and update times and its memory per device.
#pragma once

namespace dapple {

struct StageCost {
  double forward_ms = 0;    // per micro-batch, slowest replica
  double backward_ms = 0;   // includes the re-computed forward when recompute
  double recompute_ms = 0;  // that re-computed forward (whole stage or per layer)
  double static_bytes = 0;  // per device: parameters, gradients, optimizer state
  double allreduce_ms = 0;
  // The part of the allreduce no backward can hide (for lower bounds): allreduce_ms, or
  // with allreduce overlap the least ExposedAllReduceMs over the replicas.
  double allreduce_exposed_ms = 0;
  // The same when the backward is split into I and W (the buckets ready during the last W,
  // ExposedAllReduceMs with split_backward); EvaluatePlan takes it for those schedules.
  double allreduce_exposed_split_ms = 0;
  double update_ms = 0;            // the optimizer update (STEP), slowest replica
  double memory_bytes = 0;         // per device, at the warm-up depth
  double device_memory_bytes = 0;  // the smallest memory among the stage's devices
  int warmup_depth = 0;            // K_s
  // The replicas shard the optimizer state (Note [Optimizer sharding] in the runtime):
  // allreduce_ms is then the reduce-scatter, update_ms the 1/r update and the all-gather.
  bool shard_optimizer = false;
  bool fits() const { return memory_bytes <= device_memory_bytes; }
};

}  // namespace dapple
