// The event-driven core of the simulator (docs/schedules.md, "Simulator"): devices run
// their stage's lowered list in order; split-concat transfers and allreduces couple them.
// Internal to dapple_sim: Simulate() builds the EngineSetup from a plan and a cost model.
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "dapple/common/chunk_placement.h"
#include "dapple/schedule/instruction.h"
#include "dapple/sim/list_facts.h"
#include "dapple/sim/timeline.h"

namespace dapple::internal {

struct EngineStage {
  const Instruction* program = nullptr;  // the stage's lowered list (outlives the engine)
  int length = 0;
  const ListFacts* facts = nullptr;  // the list's, when the caller has them (list_facts.h)
  int first_device = 0;  // devices of the stage are first_device .. first_device+replicas-1
  int replicas = 1;
  // Note [Twin replicas] (event_engine.cc): its replicas run the same list at the same costs,
  // so the engine runs the first and copies its results to the others. Only without a
  // timeline and without op_scale.
  bool twins = false;
  double allreduce_ms = 0;  // one allreduce after the last backward (no buckets)
  // The allreduce overlapped with the backward, when bucket_ms is not empty: bucket k
  // (in allreduce order) takes bucket_ms[k] and is ready on replica j at the start of its
  // last B or W (the last to produce weight gradients) on chunk bucket_chunk[k] +
  // bucket_ready_ms[k * replicas + j]; buckets run one after another.
  std::vector<double> bucket_ms;
  std::vector<double> bucket_ready_ms;
  std::vector<int> bucket_chunk;
  int bucket_track = -1;  // timeline track of the buckets
  // With op_scale: the shared compute (devices) the allreduce, or each bucket, takes while
  // it runs (Note [Shared compute] in emulation/shared_compute.cc).
  double allreduce_load = 0;
};

// What one chunk (virtual stage, Note [Chunks] in schedule.h) costs on one device; with one
// chunk, the device's stage.
struct EngineChunkCost {
  double forward_ms = 0;
  double backward_ms = 0;
  double input_grad_ms = 0;          // I: the input gradient part of the backward
  double weight_grad_ms = 0;         // W: the weight gradient part
  double bytes_per_micro_batch = 0;  // activation memory a forward adds and its B (or W) frees
  // Split backward with re-computation: what I rebuilds and W frees (RecomputeBytes::rebuilt).
  double rebuilt_bytes = 0;
};

struct EngineDevice {
  int stage = 0;  // the device group (stage of the schedule)
  int replica = 0;
  int first_cost = 0;  // chunk c costs setup.costs[first_cost + c]
  double step_ms = 0;  // the optimizer update (STEP) of all its layers
};

// The replicas of `st` the engine runs: the first only when they are twins.
inline int RunReplicas(const EngineStage& st) { return st.twins ? 1 : st.replicas; }

// One direction of one stage boundary: every transfer on it has this cost and resources.
struct EngineRoute {
  double ms = 0;
  double load = 0;             // with op_scale: shared compute a transfer on it takes while it runs
  std::vector<int> resources;  // dense ids in [0, num_resources)
};

struct EngineSetup;
struct DeviceState;

// Where a device stands in its list, as a RunWatcher reads it.
struct DeviceProgress {
  double clock = 0;  // its clock (when blocked: when it reached the blocking instruction)
  double done = 0;   // listed costs of the instructions it ran
  double last_backward_end = -1;  // when its watched instruction ended; -1: not run yet
};

// Note [Watching a run]
// A caller that only asks whether a run ends after some time t may watch it and stop it
// early. The engine records each device's progress (DeviceProgress); after the first `n`
// times a device stops running, n the devices it runs, and then every 4n (kBoundEvery in
// event_engine.cc), it asks the watcher for a lower bound of
// when the last device ends, and stops when that bound ProvesLonger than t. How the bound
// is made is the watcher's (the planner's search: plan/search/stop_bound.h); the engine
// only keeps the progress and asks. Not with op_scale (shared compute).
class RunWatcher {
 public:
  virtual ~RunWatcher() = default;
  // Before a run of `setup` (which outlives the run): per device group, the pc whose end
  // the engine records in DeviceProgress::last_backward_end (-1: none).
  virtual void Prepare(const EngineSetup& setup, std::vector<int>& watched_pc) = 0;
  // A lower bound of when the last device ends, from every device's progress (indexed like
  // setup.devices; a DeviceState is a DeviceProgress, engine_state.h).
  virtual double Bound(const std::vector<DeviceState>& devices) const = 0;
};

// Whether a lower bound of a run's time proves it longer than `t`: by a relative 1e-9, so
// that the rounding of the bound's sums does not stop a run that would end just at t.
// The engine stops by it; the planner's memo reuses a stopped run for a later question
// by it.
inline bool ProvesLonger(double bound_ms, double t) { return bound_ms > t * (1 + 1e-9); }

struct EngineSetup {
  int num_stages = 0;  // device groups
  int num_micro_batches = 0;
  int num_chunks = 1;    // chunks per group; virtual stage c * num_stages + g
  bool v_shape = false;  // or in a V (Note [V placement] in chunk_placement.h)
  std::vector<EngineStage> stages;
  std::vector<EngineDevice> devices;
  std::vector<EngineChunkCost> costs;  // num_chunks per device
  // routes[b]: activations across virtual boundary b (virtual stage b -> b+1);
  // routes[V-1+b]: gradients (b+1 -> b), V = num_stages * num_chunks. Size 2(V-1).
  std::vector<EngineRoute> routes;
  int num_resources = 0;
  bool record_timeline = false;
  // Shared compute (Note [Shared compute] in emulation/shared_compute.cc): when not empty,
  // op_scale[d][pc] stretches the duration of device d's compute instruction at pc (F, B or STEP),
  // and the result records every compute instruction's interval.
  std::vector<std::vector<double>> op_scale;
  // Added to a forward or backward that starts after its device was idle (the step's first,
  // or one that waited for a transfer or the allreduce); Note [Resuming on shared cores] in
  // engine.h.
  double resume_ms = 0;
  // A device that waits at a receive goes on wake_ms after the transfer finished (Note
  // [Waking up on shared cores] in event_engine.cc); one that finds it finished pays nothing.
  double wake_ms = 0;
  // Note [Watching a run]: with a watcher and a finite stop_above_ms (and op_scale empty),
  // the run may stop as soon as the watcher's bound proves that a device ends later than
  // stop_above_ms; EngineResult::stopped then says so and nothing else of the result is
  // filled. The watcher must outlive the run.
  RunWatcher* watcher = nullptr;
  double stop_above_ms = std::numeric_limits<double>::infinity();
  // False: every transfer runs as soon as it is ready, whatever its resources hold (Note
  // [Runs without contention] in plan/search/bounded_run.cc): no time of such a run is later than
  // the same setup's contended run gives.
  bool contended = true;
  // When not empty, device d's clock starts at start_ms[d] instead of 0 (the next iteration
  // of a steady state: SimulateSteadyState).
  std::vector<double> start_ms;
};

struct EngineDeviceResult {
  double end_ms = 0;  // when its STEP ended
  double busy_ms = 0;
  double peak_bytes = 0;   // peak of in-flight micro-batches x bytes_per_micro_batch
  int peak_in_flight = 0;  // chunk-micro-batches with chunks
};

struct EngineResult {
  std::vector<EngineDeviceResult> devices;
  // Compute events on tracks 0..D-1 (device index); transfers on track D + route.
  std::vector<TimelineEvent> events;
  long long instructions = 0;
  // With stop_above_ms: whether the run stopped early, and a lower bound of the time the
  // last device would have ended (> stop_above_ms).
  bool stopped = false;
  double bound_ms = 0;
  // Per stage: how long its replicas waited at AR after the last of them reached it.
  std::vector<double> allreduce_exposed_ms;
  // With op_scale: [d][pc] = (start, end) of each compute instruction, (0, 0) elsewhere.
  std::vector<std::vector<std::pair<double, double>>> compute_intervals;
  // With op_scale: each transfer or allreduce that takes shared compute, and how much.
  struct Load {
    double start, end, devices;
  };
  std::vector<Load> comm_load;
};

// Runs the setup to the end. Throws dapple::Error naming every blocked device (stage,
// replica, pc, instruction) when the lists deadlock.
EngineResult RunEngine(const EngineSetup& setup);

}  // namespace dapple::internal
