// Simulate / SimulatePlan: turns a plan, its lowered schedule and a cost model into the
// engine's setup (per-device costs, per-boundary transfer routes; prepared_run.h) and its
// result into SimResult (docs/schedules.md, "Simulator").
#include "dapple/sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>

#include "dapple/common/error.h"
#include "dapple/common/slicing.h"
#include "dapple/cost/grad_buckets.h"
#include "dapple/cost/recompute_costs.h"
#include "dapple/sim/emulation/shared_compute.h"
#include "dapple/sim/event_engine.h"
#include "dapple/sim/global_norm.h"
#include "dapple/sim/prepared_run.h"

namespace dapple::internal {

void CheckShape(const Plan& plan, const ScheduleView& lowered, bool checked) {
  DAPPLE_CHECK(lowered.num_stages * lowered.num_chunks == plan.num_stages(),
               "schedule and plan stages differ");
  DAPPLE_CHECK(lowered.num_chunks == plan.virtual_stages, "schedule and plan chunks differ");
  DAPPLE_CHECK(lowered.v_shape == VShaped(plan.schedule), "schedule and plan placements differ");
  DAPPLE_CHECK(static_cast<int>(lowered.programs.size()) == lowered.num_stages);
  DAPPLE_CHECK(lowered.num_micro_batches == plan.num_micro_batches,
               "schedule and plan micro-batches differ");
  if (!checked) CheckSimulable(lowered);
}

namespace {

// Dense ids for the cost model's opaque resource ids.
int Dense(std::unordered_map<int, int>& ids, int id) {
  return ids.emplace(id, static_cast<int>(ids.size())).first->second;
}

// Where a replica runs: group s, replica j, its device and the samples of its slice.
struct ReplicaAt {
  int s = 0, j = 0, dev = 0;
  double samples = 0;
};

// A replica of the kind of the one before with a slice of the same size costs the same
// (CostModel::DeviceKind): copies its costs, update, buckets' ready times and extra memory
// (wide stages of the planner). False when it does not.
bool CopyReplicaBefore(const Plan& plan, const CostModel& cost, const ReplicaAt& r,
                       EngineDevice& ed, PreparedRun& p) {
  EngineSetup& setup = p.setup;
  EngineStage& es = setup.stages[r.s];
  const StagePlan& sp = plan.stages[r.s];
  const int j = r.j;
  if (j == 0 || cost.DeviceKind(r.dev) != cost.DeviceKind(sp.devices[j - 1]) ||
      SliceOf(plan.micro_batch_size, es.replicas, j - 1).size() !=
          SliceOf(plan.micro_batch_size, es.replicas, j).size())
    return false;
  const EngineDevice& before = setup.devices.back();
  for (int c = 0; c < setup.num_chunks; ++c) {
    const EngineChunkCost same = setup.costs[before.first_cost + c];
    setup.costs.push_back(same);
  }
  ed.step_ms = before.step_ms;
  for (size_t k = 0; k < es.bucket_ms.size(); ++k)
    es.bucket_ready_ms[k * es.replicas + j] = es.bucket_ready_ms[k * es.replicas + j - 1];
  p.recompute_extra.push_back(p.recompute_extra.back());
  setup.devices.push_back(ed);
  return true;
}

// Chunk c of the replica: its costs, its update (added to ed.step_ms), the ready times of
// its buckets `bs` (from index `bucket` on, in allreduce order) and its stage's figures.
// Returns the memory its backward's re-computation adds at its peak (0 when split).
double AddChunk(const Plan& plan, const CostModel& cost, const ReplicaAt& r, int c,
                const std::vector<GradBucket>& bs, int bucket, bool split, EngineDevice& ed,
                PreparedRun& p) {
  EngineSetup& setup = p.setup;
  EngineStage& es = setup.stages[r.s];
  const int vs = VirtualStageOf(r.s, c, setup.num_stages, setup.v_shape);
  const StagePlan& cp = plan.stages[vs];
  const int a = cp.first_layer, z = cp.last_layer, dev = r.dev, j = r.j;
  const double samples = r.samples;
  EngineChunkCost& cc = setup.costs[ed.first_cost + c];
  cc.forward_ms = cost.ForwardMs(a, z, samples, dev);
  // Re-computation runs the forward of the layers that re-compute again right before
  // each backward (Note [Re-computation per layer] in runtime/worker/recompute_segments.cc).
  const std::vector<int> recomputed = plan.RecomputedLayers(vs);
  const double refwd = RecomputeForwardMs(cost, recomputed, samples, dev);
  cc.backward_ms = refwd + cost.BackwardMs(a, z, samples, dev);
  // Split backward: the input-gradient part rebuilds the forward first.
  cc.input_grad_ms = refwd + cost.BackwardInputMs(a, z, samples, dev);
  cc.weight_grad_ms = cost.BackwardWeightMs(a, z, samples, dev);
  // Every replica updates all of its stage's parameters, whatever its slice; with the
  // optimizer sharded 1/r of them, and STEP ends with the all-gather (Note [Optimizer
  // sharding in the simulator]).
  const bool shard = cp.shard_optimizer && es.replicas > 1;
  const double update = cost.UpdateMs(a, z, dev) / (shard ? es.replicas : 1);
  const double all_gather = shard ? cost.AllGatherMs(a, z, plan.stages[r.s].devices) : 0.0;
  ed.step_ms += update + all_gather;
  // Bucket k is ready once the backward (or W) has passed through its lowest layer
  // (both run from the last layer down); the last bucket with the whole of it.
  for (size_t k = 0; k < bs.size(); ++k, ++bucket)
    es.bucket_ready_ms[bucket * es.replicas + j] =
        k + 1 == bs.size() ? (split ? cc.weight_grad_ms : cc.backward_ms)
        : split            ? cost.BackwardWeightMs(bs[k].first_layer, z, samples, dev)
                           : refwd + cost.BackwardMs(bs[k].first_layer, z, samples, dev);
  // A micro-batch keeps the activations of the layers that do not re-compute and each
  // segment's input until its backward, which rebuilds one segment at a time (added once,
  // by the caller); a split one holds what it rebuilt from I until W.
  const RecomputeBytes bytes = RecomputeActivationBytes(cost, a, z, recomputed, samples);
  cc.bytes_per_micro_batch = bytes.kept;
  if (split) cc.rebuilt_bytes = bytes.rebuilt;
  StageStats& stats = p.result.stages[vs];
  stats.forward_ms = std::max(stats.forward_ms, cc.forward_ms);
  stats.backward_ms = std::max(stats.backward_ms, cc.backward_ms);
  stats.input_grad_ms = std::max(stats.input_grad_ms, cc.input_grad_ms);
  stats.weight_grad_ms = std::max(stats.weight_grad_ms, cc.weight_grad_ms);
  stats.update_ms = std::max(stats.update_ms, update);
  stats.allgather_ms = all_gather;
  return split ? 0.0 : bytes.rebuilt_peak;
}

// Replica j of group s: its costs per chunk, its update and when its buckets are ready.
void AddReplica(const Plan& plan, const CostModel& cost, int s, int j,
                const std::vector<std::vector<GradBucket>>& buckets, bool split, PreparedRun& p) {
  EngineSetup& setup = p.setup;
  EngineStage& es = setup.stages[s];
  const int dev = plan.stages[s].devices[j];
  if (dev < 0 || dev >= cost.num_devices())
    ThrowInput("plan: stage {} device {} outside the cluster's {} devices", s, dev,
               cost.num_devices());
  const ReplicaAt r{s, j, dev,
                    static_cast<double>(SliceOf(plan.micro_batch_size, es.replicas, j).size())};
  EngineDevice ed;
  ed.stage = s;
  ed.replica = j;
  ed.first_cost = static_cast<int>(setup.costs.size());
  if (CopyReplicaBefore(plan, cost, r, ed, p)) return;
  if (j > 0) es.twins = false;
  double extra = 0;
  int bucket = 0;  // buckets in allreduce order: chunk v-1's first
  for (int c = 0; c < setup.num_chunks; ++c) setup.costs.emplace_back();
  for (int c = setup.num_chunks - 1; c >= 0; --c) {
    extra = std::max(extra, AddChunk(plan, cost, r, c, buckets[c], bucket, split, ed, p));
    bucket += static_cast<int>(buckets[c].size());
  }
  p.recompute_extra.push_back(extra);
  setup.devices.push_back(ed);
}

// Group s: its list, its allreduce (whole or in buckets, per chunk), then its replicas.
// Note [Twin replicas] (event_engine.cc): a stage whose every replica copies the costs of
// the one before runs once when `may_twin`.
void AddStage(const Plan& plan, const ScheduleView& lowered, const ListsChecked* checked,
              const CostModel& cost, int s, bool may_twin, PreparedRun& p) {
  EngineSetup& setup = p.setup;
  const int S = setup.num_stages, v = setup.num_chunks;
  const StagePlan& sp = plan.stages[s];
  if (sp.devices.empty()) ThrowInput("plan: stage {} has no devices", s);
  EngineStage& es = setup.stages[s];
  const std::vector<Instruction>& program = *lowered.programs[s];
  es.program = program.data();
  es.length = static_cast<int>(program.size());
  if (checked) es.facts = checked->facts[s];
  es.first_device = static_cast<int>(setup.devices.size());
  es.replicas = sp.replicas();
  // In the split schedules the last weight gradients come from a W, not a B.
  const bool split = std::any_of(program.begin(), program.end(),
                                 [](const Instruction& in) { return in.op == Op::kWeightGrad; });
  const bool overlap = plan.allreduce_overlap && es.replicas > 1;
  // Per chunk, from the last one down: the backward reaches the lower chunks last, so
  // their buckets go last.
  std::vector<std::vector<GradBucket>> buckets(v);
  for (int c = v - 1; c >= 0; --c) {
    const int vs = VirtualStageOf(s, c, S, setup.v_shape);
    const StagePlan& cp = plan.stages[vs];
    StageStats& stats = p.result.stages[vs];
    // A stage that shards its optimizer reduce-scatters instead (Note [Optimizer sharding
    // in the simulator]).
    const bool shard = cp.shard_optimizer && es.replicas > 1;
    stats.allreduce_ms = shard ? cost.ReduceScatterMs(cp.first_layer, cp.last_layer, sp.devices)
                               : cost.AllReduceMs(cp.first_layer, cp.last_layer, sp.devices);
    es.allreduce_ms += stats.allreduce_ms;
    p.static_bytes[s] +=
        shard ? cost.ShardedStaticMemoryBytes(cp.first_layer, cp.last_layer, es.replicas)
              : cost.StaticMemoryBytes(cp.first_layer, cp.last_layer);
    if (!overlap) continue;
    buckets[c] = GradientBuckets(cost, cp.first_layer, cp.last_layer);
    std::vector<double> ms = BucketAllReduceMs(cost, buckets[c], sp.devices, shard);
    es.bucket_ms.insert(es.bucket_ms.end(), ms.begin(), ms.end());
    es.bucket_chunk.insert(es.bucket_chunk.end(), ms.size(), c);
    stats.allreduce_ms = 0;
    for (double x : ms) stats.allreduce_ms += x;
    stats.allreduce_buckets = static_cast<int>(ms.size());
  }
  es.bucket_ready_ms.resize(es.bucket_ms.size() * es.replicas);
  es.twins = may_twin && es.replicas > 1;
  for (int j = 0; j < sp.replicas(); ++j) AddReplica(plan, cost, s, j, buckets, split, p);
}

// Transfer routes: activations b -> b+1 at index b, gradients b+1 -> b at V-1+b, b a
// virtual boundary. The gradient direction asks the cost model for the reversed
// transfer, so it holds the links and ports of that direction (full duplex: activations
// and gradients do not contend). Then the timeline tracks of the bucketed allreduces,
// after the devices and the links.
void AddRoutes(const Plan& plan, const CostModel& cost, PreparedRun& p) {
  EngineSetup& setup = p.setup;
  const int S = setup.num_stages, V = S * setup.num_chunks;
  const double m = plan.micro_batch_size;
  std::unordered_map<int, int> resource_ids;
  setup.routes.resize(2 * std::max(V - 1, 0));
  for (int b = 0; b + 1 < V; ++b) {
    const StagePlan &lo = plan.stages[b], &hi = plan.stages[b + 1];
    TransferCost fwd = cost.Transfer(lo.last_layer, m, lo.devices, hi.devices);
    TransferCost bwd = cost.Transfer(lo.last_layer, m, hi.devices, lo.devices);
    setup.routes[b].ms = fwd.ms;
    for (int r : fwd.resources) setup.routes[b].resources.push_back(Dense(resource_ids, r));
    setup.routes[V - 1 + b].ms = bwd.ms;
    for (int r : bwd.resources) setup.routes[V - 1 + b].resources.push_back(Dense(resource_ids, r));
    p.result.stages[b].send_ms = fwd.ms;
  }
  setup.num_resources = static_cast<int>(resource_ids.size());
  for (int s = 0; s < S; ++s) {
    EngineStage& es = setup.stages[s];
    if (es.bucket_ms.empty()) continue;
    es.bucket_track = static_cast<int>(setup.devices.size()) + 2 * (V - 1) +
                      static_cast<int>(p.bucket_stages.size());
    p.bucket_stages.push_back(s);
  }
}

}  // namespace

EngineResult RunOnce(EngineSetup& setup, const CostModel& cost) {
  const EmulationCosts* emulation = cost.Emulation();
  return emulation ? RunWithSharedCompute(setup, emulation->SharedCompute()) : RunEngine(setup);
}

// S device groups of v chunks each;
// plan.stages[c * S + g] is chunk c of group g (Note [Chunks] in schedule.h), or
// plan.stages[2S - 1 - g] its chunk 1 in a V (Note [V placement]). With v = 1 the groups
// are the plan's stages.
PreparedRun Prepare(const Plan& plan, const ScheduleView& lowered, const CostModel& cost,
                    const PrepareOptions& options, const ListsChecked* checked) {
  const int S = lowered.num_stages, v = lowered.num_chunks;
  PreparedRun p;
  EngineSetup& setup = p.setup;
  setup.num_stages = S;
  setup.num_micro_batches = plan.num_micro_batches;
  setup.num_chunks = v;
  setup.v_shape = lowered.v_shape;
  setup.record_timeline = options.record_timeline;
  setup.stages.resize(S);
  p.result.stages.resize(S * v);
  p.static_bytes.assign(S, 0.0);
  const EmulationCosts* emulation = cost.Emulation();
  // Twins: not with a timeline nor with emulated devices (op_scale).
  const bool may_twin = options.twins && !options.record_timeline && !emulation;
  for (int s = 0; s < S; ++s) AddStage(plan, lowered, checked, cost, s, may_twin, p);
  AddRoutes(plan, cost, p);
  if (emulation) AddEmulationTerms(plan, *emulation, setup);
  return p;
}

// The whole run's figures: iteration time, per-device busy, bubble and memory, speedup.
void FillDevices(const Plan& plan, const CostModel& cost, const PreparedRun& p,
                 const EngineResult& run, SimResult& result) {
  const int D = static_cast<int>(p.setup.devices.size());
  for (const auto& d : run.devices) result.iteration_ms = std::max(result.iteration_ms, d.end_ms);
  result.devices.resize(D);
  double bubble_sum = 0;
  for (int d = 0; d < D; ++d) {
    const EngineDevice& ed = p.setup.devices[d];
    const EngineDeviceResult& rd = run.devices[d];
    DeviceStats& ds = result.devices[d];
    ds.device = plan.stages[ed.stage].devices[ed.replica];
    ds.stage = ed.stage;
    ds.replica = ed.replica;
    ds.busy_ms = rd.busy_ms;
    ds.bubble_ms = result.iteration_ms - rd.busy_ms;
    ds.static_memory_bytes = p.static_bytes[ed.stage];
    ds.peak_activation_bytes = rd.peak_bytes + (rd.peak_in_flight > 0 ? p.recompute_extra[d] : 0);
    ds.peak_memory_bytes = ds.static_memory_bytes + ds.peak_activation_bytes;
    ds.peak_in_flight = rd.peak_in_flight;
    if (result.iteration_ms > 0) bubble_sum += ds.bubble_ms / result.iteration_ms;
  }
  result.bubble_fraction = D > 0 ? bubble_sum / D : 0;
  result.speedup = result.iteration_ms > 0
                       ? cost.SingleDeviceMs(plan.global_batch_size) / result.iteration_ms
                       : 0;
  result.instructions = run.instructions;
  // A group's exposed allreduce goes on its first chunk.
  for (int s = 0; s < p.setup.num_stages; ++s)
    result.stages[s].allreduce_exposed_ms = run.allreduce_exposed_ms[s];
}

}  // namespace dapple::internal

namespace dapple {
namespace {

void FillTimeline(const Plan& plan, internal::PreparedRun& p, internal::EngineResult& run) {
  const int S = p.setup.num_stages, v = p.setup.num_chunks, V = S * v;
  Timeline& t = p.result.timeline;
  t.title = fmt::format("simulated: {}, {} stages, {} micro-batches", ToString(plan.schedule), S,
                        plan.num_micro_batches);
  if (v > 1) t.title += fmt::format(", {} chunks per stage", v);
  for (const DeviceStats& ds : p.result.devices)
    t.device_labels.push_back(
        fmt::format("dev {} (stage {}, replica {})", ds.device, ds.stage, ds.replica));
  // With chunks the links are between virtual stages (plan.stages entries).
  for (int b = 0; b + 1 < V; ++b)
    t.device_labels.push_back(fmt::format("link stage {} -> {} (activations)", b, b + 1));
  for (int b = 0; b + 1 < V; ++b)
    t.device_labels.push_back(fmt::format("link stage {} -> {} (gradients)", b + 1, b));
  for (int s : p.bucket_stages)
    t.device_labels.push_back(fmt::format("allreduce stage {} (buckets)", s));
  t.events = std::move(run.events);
  // Note [Optimizer sharding in the simulator]: a sharded stage's STEP is its 1/r update
  // and then the all-gather of the parameters (AllGatherMs), which the engine runs as one
  // instruction (nothing of the iteration follows a STEP); the timeline shows its two parts.
  const size_t n = t.events.size();
  t.events.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    TimelineEvent& e = t.events[i];
    // Its buckets are reduce-scatters, named as the runtime's trace names them.
    if (e.category == "allreduce" && e.name.rfind("AR b", 0) == 0 && e.stage >= 0 &&
        p.result.stages[e.stage].allgather_ms > 0)
      e.name.replace(0, 2, "RS");
    if (e.category != "step" || e.device >= static_cast<int>(p.result.devices.size())) continue;
    const double ag = p.result.stages[e.stage].allgather_ms;
    if (ag <= 0) continue;
    const double end = e.end_ms;
    e.end_ms = std::max(e.start_ms, end - ag);
    t.events.push_back({e.device, "AG", "allreduce", e.end_ms, end, e.stage, -1});
  }
}

}  // namespace

SimResult Simulate(const Plan& plan, const Schedule& lowered, const CostModel& cost,
                   const SimOptions& options) {
  return Simulate(plan, ViewOf(lowered), cost, options);
}

// Note [Simulate is plain]: every replica runs (no twins), nothing stops early and every
// transfer takes its links in turn; the planner's shortcuts are its own
// (plan/search/bounded_run.h), each checked against this by a test.
SimResult Simulate(const Plan& plan, const ScheduleView& lowered, const CostModel& cost,
                   const SimOptions& options) {
  using namespace internal;
  CheckShape(plan, lowered, /*checked=*/false);
  PreparedRun p =
      Prepare(plan, lowered, cost, {.record_timeline = options.record_timeline}, nullptr);
  EngineResult run = RunOnce(p.setup, cost);
  if (options.global_norm_allreduce) {
    std::vector<int> all;
    for (const EngineDevice& ed : p.setup.devices)
      all.push_back(plan.stages[ed.stage].devices[ed.replica]);
    AddGlobalNormAllReduce(p.setup, cost.ScalarAllReduceMs(all), run);
  }
  FillDevices(plan, cost, p, run, p.result);
  if (options.record_timeline) FillTimeline(plan, p, run);
  return std::move(p.result);
}

Schedule LoweredSchedule(const Plan& plan) {
  const int groups = plan.num_device_groups();
  std::vector<int> replicas;
  replicas.reserve(groups);
  for (int s = 0; s < groups; ++s) replicas.push_back(plan.stages[s].replicas());
  return LowerComms(
      MakeSchedule(plan.schedule, groups, plan.num_micro_batches, plan.virtual_stages), replicas);
}

SimResult SimulatePlan(const Plan& plan, const CostModel& cost, const SimOptions& options) {
  return Simulate(plan, LoweredSchedule(plan), cost, options);
}

}  // namespace dapple
