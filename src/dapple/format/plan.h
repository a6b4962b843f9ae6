// A training plan (`dapple-plan/1`, docs/design.md section 8): stages (layer ranges and their
// devices), micro-batching and schedule, plus the planner's estimate.
#pragma once

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dapple/common/chunk_placement.h"
#include "dapple/common/schedule_kind.h"
#include "dapple/format/cluster.h"
#include "dapple/format/profile.h"

namespace dapple {

struct StagePlan {
  int first_layer = 0;  // inclusive indices into the profile's layer order
  int last_layer = 0;
  std::string first_layer_id;  // the profile's layer ids; win over indices when both given
  std::string last_layer_id;
  std::vector<int> devices;  // global device ids = ranks; replica j is devices[j]
  // Re-computation: the stage keeps only its input per micro-batch in flight and runs the
  // forward again before each backward. JSON `recompute` of the stage, false when absent.
  bool recompute = false;
  // Note [Re-computation per layer] (runtime/worker/recompute_segments.cc): the layers of the stage
  // that re-compute, when not all do (`recompute` false): each keeps only its input, and a run
  // of consecutive ones (a segment) only the input of its first. JSON `recompute_layers`, layer
  // ids (strings) or indices into the profile's layer order; sorted indices here after
  // ResolvePlanLayers, which also fills recompute_layer_ids.
  std::vector<int> recompute_layers = {};
  std::vector<std::string> recompute_layer_ids = {};
  // Optimizer sharding (ZeRO stage 1, docs/runtime.md "Optimizer sharding"): the replicas
  // reduce-scatter the gradients, each updates its shard of the parameters with its shard of
  // the optimizer state, then they all-gather the parameters. JSON `shard_optimizer` of the
  // stage, false when absent; needs at least 2 replicas.
  bool shard_optimizer = false;
  int replicas() const { return static_cast<int>(devices.size()); }
};

struct PlanEstimate {
  double iteration_ms = 0;
  double speedup = 0;
  double latency_ms = 0;  // the planner's analytic L (docs/design.md section 6)
  int pivot_stage = 0;
  std::vector<double> stage_peak_memory_bytes;  // per stage, per device of that stage
  // What the training process itself holds on a device of the plan (the cluster's
  // process_memory_bytes, the largest over the plan's devices), beside the stage's peak
  // above; 0 when the cluster gave none. JSON `process_memory_bytes`, written when > 0.
  double process_memory_bytes = 0;
  // The simulated bubble fraction (SimResult::bubble_fraction); < 0: not recorded (older
  // plans), JSON `bubble_fraction`.
  double bubble_fraction = -1;
};

struct Plan {
  std::string planner;  // who made it ("dapple", "dp", "hand", ...)
  int global_batch_size = 0;
  int micro_batch_size = 0;
  int num_micro_batches = 0;
  ScheduleKind schedule = ScheduleKind::kDappleA;
  // Every stage re-computes (JSON `recompute` of the plan; old files): see Recomputes.
  bool recompute = false;
  // Gradients allreduced in buckets that overlap the last micro-batch's backward (as DDP
  // does); false: one allreduce after the last backward (the paper). JSON
  // `allreduce_overlap`, true when absent (docs/schedules.md, "Allreduce overlap").
  bool allreduce_overlap = true;
  // Planned for consecutive iterations (`dapple plan --steady-state`): a stage starts its next
  // forward once its own update ended, so one iteration's tail overlaps the next one's head
  // (Note [Steady state] in sim/simulator.h). JSON `steady_state`, false when absent.
  bool steady_state = false;
  // Model chunks per device group v (JSON `virtual_stages`, 1 when absent; > 1 only with
  // schedule `interleaved`, and exactly 2 with the V shapes `zb-v`, `v-half` and `v-min`):
  // `stages` then lists the S*v chunks in model order and chunk k runs on the devices of
  // chunk GroupOf(k): k mod S, or in a V 2S - 1 - k for k >= S (docs/schedules.md,
  // "Interleaved 1F1B", "ZB-V" and "V-Half and V-Min").
  int virtual_stages = 1;
  // The compute precision of the profile the plan was made from (Profile::precision), so
  // that `dapple train` can warn when it trains in another. JSON `precision`, float32 when
  // absent, written when not float32.
  Precision precision = Precision::kFloat32;
  std::vector<StagePlan> stages;
  std::optional<PlanEstimate> estimate;
  // What the plan was made from, for re-planning (`dapple train --elastic`): the profile's
  // path and the cluster's preset name or path, as `dapple plan` was given them (paths made
  // absolute). JSON `profile` and `cluster`; empty when absent (older and hand-written plans).
  std::string profile;
  std::string cluster;

  // Entries of `stages`: the virtual stages (chunks) when virtual_stages > 1.
  int num_stages() const { return static_cast<int>(stages.size()); }
  // Device groups S: the stages of a plan without chunks.
  int num_device_groups() const { return num_stages() / std::max(virtual_stages, 1); }
  // The device group (entry of `stages` < S) whose devices run entry k (Note [V placement]).
  int GroupOf(int k) const {
    return GroupOfVirtualStage(k, num_device_groups(), VShaped(schedule));
  }
  int num_devices() const;  // sum of replicas
  // Whether stage s re-computes as a whole: the plan's flag or the stage's.
  bool Recomputes(int s) const { return recompute || stages[s].recompute; }
  // The layers of stage s that re-compute, sorted: all of them when Recomputes(s), else its
  // recompute_layers.
  std::vector<int> RecomputedLayers(int s) const;
  // Whether any layer of stage s re-computes.
  bool RecomputesAny(int s) const { return Recomputes(s) || !stages[s].recompute_layers.empty(); }
  bool AnyRecompute() const;
  bool AnyShardedOptimizer() const;
};

// Checks the plan against the profile's layers and the cluster: stages cover every layer
// exactly once and in order, device ids exist and are not shared, GBS = M x m, every stage
// has at least one device, a stage that shards its optimizer state has replicas, chunks
// (virtual_stages) that the stages and layers divide into and M the schedule can run (CheckChunks),
// a re-computing stage has forward times in the profile (what re-computation costs), and its
// recompute_layers lie in the stage. Throws
// InputError naming `source` and the stage/field.
void ValidatePlan(const Plan& plan, const Profile& profile, const Cluster& cluster,
                  const std::string& source);
// Fills first_layer/last_layer from the ids (ids win) or the ids from the indices, and
// recompute_layers with recompute_layer_ids (sorted, without repeats). Throws InputError
// naming an id the profile does not have.
void ResolvePlanLayers(Plan& plan, const Profile& profile, const std::string& source);

Plan ReadPlanJson(const std::filesystem::path& path);  // shape checks only; then Resolve+Validate
// Parses plan JSON held in memory; `source` names it in errors. Shape checks only.
Plan ParsePlanJson(const std::string& text, const std::string& source);
void WritePlanJson(const Plan& plan, const std::filesystem::path& path);  // atomic
std::string PlanToJsonText(const Plan& plan);

}  // namespace dapple
