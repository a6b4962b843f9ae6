// The exact event-driven simulator of docs/design.md section 5: runs a lowered schedule of a
// plan on a cost model and reports time, bubbles, memory and the timeline.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/format/plan.h"
#include "dapple/schedule/schedule.h"
#include "dapple/sim/list_facts.h"
#include "dapple/sim/timeline.h"

namespace dapple {

struct SimOptions {
  bool record_timeline = true;  // off in the planner's inner loop
  // The gradients are clipped by their global norm (`--clip-grad-norm`): one scalar
  // allreduce over every device of the plan before the optimizer steps (Note [The norm's
  // allreduce in the simulator] in global_norm.h). Simulate only: not in BoundedRun.
  bool global_norm_allreduce = false;
};

struct DeviceStats {
  int device = 0;
  int stage = 0;
  int replica = 0;
  double busy_ms = 0;    // compute time (forward, backward, optimizer update)
  double bubble_ms = 0;  // iteration_ms - busy_ms
  double static_memory_bytes = 0;
  double peak_activation_bytes = 0;
  double peak_memory_bytes = 0;  // static + peak activations
  // Micro-batches forwarded and not yet backwarded (B, or W in the split schedules), at peak.
  int peak_in_flight = 0;
};

struct StageStats {
  double forward_ms = 0;     // per micro-batch, per replica
  double backward_ms = 0;    // B, the whole backward
  double input_grad_ms = 0;  // I and W, its parts in the split schedules (zb-h1)
  double weight_grad_ms = 0;
  double update_ms = 0;       // the optimizer update at STEP, once per iteration (slowest replica)
  double send_ms = 0;         // transfer to the next stage per micro-batch (0 for the last)
  double allreduce_ms = 0;    // the whole allreduce (with overlap: the sum of its buckets)
  int allreduce_buckets = 0;  // with plan.allreduce_overlap and > 1 replica, else 0
  // How long the replicas waited at AR once the last of them reached it: the part of the
  // allreduce the backward did not hide (allreduce_ms without overlap).
  double allreduce_exposed_ms = 0;
  // A stage that shards its optimizer state (StagePlan::shard_optimizer): allreduce_ms is its
  // reduce-scatter, update_ms its 1/r update, and this the all-gather that ends its STEP.
  double allgather_ms = 0;
};

struct SimResult {
  double iteration_ms = 0;
  double speedup = 0;                // SingleDeviceMs(GBS) / iteration_ms
  double bubble_fraction = 0;        // mean over devices of bubble_ms / iteration_ms
  std::vector<DeviceStats> devices;  // indexed like the plan's devices, stage by stage
  std::vector<StageStats> stages;
  Timeline timeline;           // empty events unless record_timeline
  long long instructions = 0;  // executed (for the benchmark)
  // A BoundedRun stopped once it proved iteration_ms (then a lower bound) above its
  // time; the other fields but `stages` are not filled.
  bool stopped = false;
};

// Runs `lowered` (from LowerComms) for `plan`: the exact time and nothing else (Note
// [Simulate is plain] in simulator.cc). Throws Error when the schedule deadlocks.
SimResult Simulate(const Plan& plan, const Schedule& lowered, const CostModel& cost,
                   const SimOptions& options = {});

// A lowered schedule whose stage lists are held elsewhere (each must outlive the call), so
// that schedules which share lists need not copy them: the planner's memo keeps each
// stage's list once per schedule, S, M, v and whether the stage has replicas.
struct ScheduleView {
  int num_stages = 0;
  int num_micro_batches = 0;
  int num_chunks = 1;
  std::vector<const std::vector<Instruction>*> programs;  // [stage]
  // The chunks in a V (Note [V placement] in chunk_placement.h): Simulate checks it
  // against the plan's schedule.
  bool v_shape = false;
};
SimResult Simulate(const Plan& plan, const ScheduleView& lowered, const CostModel& cost,
                   const SimOptions& options = {});
// A view of every list of `lowered` (which must outlive it).
ScheduleView ViewOf(const Schedule& lowered);
// Memory safety of the engine, which indexes by micro-batch and neighbour: throws Error
// unless every micro-batch and chunk of `lowered` is in range and every transfer goes to
// an existing neighbour. Simulate checks it before each run, the planner's BoundedRun
// unless its lists come checked (ListsChecked). Deeper soundness (pairing, deadlock) is
// FindScheduleError's job; a deadlock still throws.
void CheckSimulable(const ScheduleView& lowered);
// Builds plan.schedule's schedule, lowers it and runs it.
SimResult SimulatePlan(const Plan& plan, const CostModel& cost, const SimOptions& options = {});

// Note [Steady state]: `iterations` consecutive iterations of the plan, where a device starts
// the next one as soon as its own STEP of the last one ended (the update of a stage must end
// before that stage's next forward; nothing else waits for the whole pipeline). Each
// iteration is simulated as Simulate does, its devices' clocks starting at those ends; the
// transfers of two iterations do not contend (a device's last receive of one iteration ends
// before its STEP). iteration_ms: how much later the last update of the last iteration ends
// than the last update of the one before; cold_ms the first iteration's time (Simulate's).
struct SteadyState {
  double iteration_ms = 0;
  double cold_ms = 0;
  int iterations = 0;
};
SteadyState SimulateSteadyState(const Plan& plan, const CostModel& cost, int iterations = 2,
                                const SimOptions& options = {});
// plan.schedule's lowered schedule, as SimulatePlan runs it.
Schedule LoweredSchedule(const Plan& plan);

// What a caller that runs the same lists many times (the planner's memo) did once per
// list: CheckSimulable passed on each, and [stage] FactsOf each (list_facts.h). For the
// planner's BoundedRun (plan/search/bounded_run.h).
struct ListsChecked {
  std::vector<const ListFacts*> facts;
};

}  // namespace dapple
