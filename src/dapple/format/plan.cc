// Plan validation against a profile and a cluster, and layer id/index resolution.
#include "dapple/format/plan.h"

#include <algorithm>
#include <map>

#include "dapple/common/error.h"

namespace dapple {
namespace {

// A plan with chunks: S*v entries in `stages`, each with at least one layer, and an M that
// the interleaved schedule can run (CheckChunks, which also refuses another schedule and a
// V-shaped one without 2 chunks).
void CheckVirtualStages(const Plan& plan, int num_layers, const std::string& source) {
  const int v = plan.virtual_stages, entries = plan.num_stages();
  if (v < 1) ThrowInput("{}: virtual_stages: must be at least 1 (got {})", source, v);
  if (v == 1 && plan.schedule != ScheduleKind::kInterleaved && !VShaped(plan.schedule)) return;
  if (entries % v != 0)
    ThrowInput(
        "{}: virtual_stages: {} chunks per device group do not divide the {} entries of stages "
        "(S groups x v chunks)",
        source, v, entries);
  if (entries > num_layers)
    ThrowInput("{}: virtual_stages: {} x {} chunks but the profile has only {} layers", source,
               entries / v, v, num_layers);
  CheckChunks(plan.schedule, entries / v, plan.num_micro_batches, v, source + ": ");
}

// recompute_layers from the ids (ids win) or the ids from the indices; sorted, without repeats.
void ResolveRecomputeLayers(const Profile& profile, const std::string& where, StagePlan& st) {
  std::vector<int>& layers = st.recompute_layers;
  if (!st.recompute_layer_ids.empty()) {
    layers.clear();
    for (const std::string& id : st.recompute_layer_ids) {
      const int i = profile.IndexOf(id);
      if (i < 0) ThrowInput("{}.recompute_layers: the profile has no layer '{}'", where, id);
      layers.push_back(i);
    }
  }
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  st.recompute_layer_ids.clear();
  for (int l : layers) {
    if (l >= profile.num_layers())
      ThrowInput("{}.recompute_layers: {} is not a layer of the profile (0..{})", where, l,
                 profile.num_layers() - 1);
    st.recompute_layer_ids.push_back(profile.layers[l].id);
  }
}

// Whether the profile times any forward: the model's layer names alone (what `dapple train`
// checks a plan against) cost nothing, so nothing about costing re-computation is checked.
bool TimesForwards(const Profile& profile) {
  for (const LayerProfile& layer : profile.layers) {
    if (layer.forward_ms > 0) return true;
    for (double ms : layer.forward_ms_by_batch)
      if (ms > 0) return true;
  }
  return false;
}

// A stage's recompute_layers lie in the stage, and some of the layers that re-compute have
// forward times (what re-computing them costs) when the profile times forwards at all.
void CheckRecomputeLayers(const Plan& plan, const Profile& profile, const std::string& source,
                          int s) {
  const StagePlan& st = plan.stages[s];
  for (size_t i = 0; i < st.recompute_layers.size(); ++i) {
    const int l = st.recompute_layers[i];
    if (l < st.first_layer || l > st.last_layer)
      ThrowInput(
          "{}: stages[{}].recompute_layers[{}]: layer {} ('{}') is not in the stage (layers "
          "{}..{})",
          source, s, i, l, l < profile.num_layers() ? profile.layers[l].id : "?", st.first_layer,
          st.last_layer);
  }
  if (!plan.RecomputesAny(s) || !TimesForwards(profile)) return;
  bool timed = false;
  for (int l : plan.RecomputedLayers(s)) {
    const LayerProfile& layer = profile.layers[l];
    timed = timed || layer.forward_ms > 0;
    for (double ms : layer.forward_ms_by_batch) timed = timed || ms > 0;
  }
  if (!timed)
    ThrowInput(
        "{}: stages[{}].{}: the profile has no forward times for the layers that re-compute "
        "(forward_ms is 0), so re-computation cannot be costed",
        source, s, plan.Recomputes(s) ? "recompute" : "recompute_layers");
}

// m, M and the global batch agree.
void CheckMicroBatching(const Plan& plan, const std::string& source) {
  if (plan.micro_batch_size < 1)
    ThrowInput("{}: micro_batch_size: must be at least 1 (got {})", source, plan.micro_batch_size);
  if (plan.num_micro_batches < 1)
    ThrowInput("{}: num_micro_batches: must be at least 1 (got {})", source,
               plan.num_micro_batches);
  if (static_cast<long long>(plan.micro_batch_size) * plan.num_micro_batches !=
      plan.global_batch_size)
    ThrowInput(
        "{}: global_batch_size: {} but num_micro_batches x micro_batch_size = {} x {} = {} "
        "(GBS must equal M x m)",
        source, plan.global_batch_size, plan.num_micro_batches, plan.micro_batch_size,
        static_cast<long long>(plan.micro_batch_size) * plan.num_micro_batches);
}

// Stage s begins where the stage before it ends (stage 0 at layer 0) and ends in the profile.
void CheckStageLayers(const Plan& plan, int n, const std::string& source, int s) {
  const StagePlan& st = plan.stages[s];
  if (s == 0 && st.first_layer != 0)
    ThrowInput(
        "{}: stages[0].first_layer: {} but must be 0 (stages must cover the layers in "
        "order)",
        source, st.first_layer);
  if (s > 0 && st.first_layer != plan.stages[s - 1].last_layer + 1)
    ThrowInput(
        "{}: stages[{}].first_layer: {} but stage {} ended at layer {} (stages must "
        "cover the layers in order)",
        source, s, st.first_layer, s - 1, plan.stages[s - 1].last_layer);
  if (st.last_layer < st.first_layer || st.last_layer >= n)
    ThrowInput(
        "{}: stages[{}].last_layer: {} must lie in {}..{} (first_layer..last layer of "
        "the profile)",
        source, s, st.last_layer, st.first_layer, n - 1);
}

// Stage s's devices: some; a chunk's those of its group's first chunk; in the cluster and no
// other group's (`owner`: device -> stage, so far); at most one replica per sample.
void CheckStageDevices(const Plan& plan, const Cluster& cluster, const std::string& source, int s,
                       std::map<int, int>& owner) {
  const StagePlan& st = plan.stages[s];
  const int groups = plan.num_device_groups();
  if (st.devices.empty()) ThrowInput("{}: stages[{}].devices: must not be empty", source, s);
  if (s >= groups && st.devices != plan.stages[plan.GroupOf(s)].devices)
    ThrowInput(
        "{}: stages[{}].devices: chunk {} runs on the devices of chunk {} (virtual_stages {}: "
        "{})",
        source, s, s, plan.GroupOf(s), plan.virtual_stages,
        VShaped(plan.schedule) ? fmt::format("{} places chunk k >= {} on those of chunk {} - k",
                                             ToString(plan.schedule), groups, 2 * groups - 1)
                               : fmt::format("chunk k on those of chunk k mod {}", groups));
  for (size_t r = 0; s < groups && r < st.devices.size(); ++r) {
    int d = st.devices[r];
    if (d < 0 || d >= cluster.num_devices())
      ThrowInput(
          "{}: stages[{}].devices[{}]: device {} is not in cluster '{}' (devices "
          "0..{})",
          source, s, r, d, cluster.name, cluster.num_devices() - 1);
    auto [it, fresh] = owner.emplace(d, s);
    if (!fresh)
      ThrowInput("{}: stages[{}].devices[{}]: device {} is already used by stage {}", source, s, r,
                 d, it->second);
  }
  if (st.replicas() > plan.micro_batch_size)
    ThrowInput(
        "{}: stages[{}].devices: {} replicas but micro_batch_size is {} (every replica "
        "needs at least one sample)",
        source, s, st.replicas(), plan.micro_batch_size);
}

// A stage shards its optimizer state only with replicas and without chunks.
void CheckStageSharding(const Plan& plan, const std::string& source, int s) {
  const StagePlan& st = plan.stages[s];
  if (st.shard_optimizer && st.replicas() < 2)
    ThrowInput(
        "{}: stages[{}].shard_optimizer: the stage has 1 device; sharding the optimizer "
        "state needs at least 2 replicas",
        source, s);
  if (st.shard_optimizer && plan.virtual_stages > 1)
    ThrowInput("{}: stages[{}].shard_optimizer: not supported with virtual_stages {} (chunks)",
               source, s, plan.virtual_stages);
}

}  // namespace

int Plan::num_devices() const {
  int n = 0;
  for (int s = 0; s < num_device_groups(); ++s) n += stages[s].replicas();
  return n;
}

std::vector<int> Plan::RecomputedLayers(int s) const {
  const StagePlan& st = stages[s];
  if (!Recomputes(s)) return st.recompute_layers;
  std::vector<int> all;
  for (int l = st.first_layer; l <= st.last_layer; ++l) all.push_back(l);
  return all;
}

bool Plan::AnyRecompute() const {
  for (int s = 0; s < num_stages(); ++s)
    if (RecomputesAny(s)) return true;
  return false;
}

bool Plan::AnyShardedOptimizer() const {
  for (const StagePlan& st : stages)
    if (st.shard_optimizer) return true;
  return false;
}

void ResolvePlanLayers(Plan& plan, const Profile& profile, const std::string& source) {
  const int n = profile.num_layers();
  auto resolve = [&](int s, const char* what, int& index, std::string& id) {
    if (!id.empty()) {
      int i = profile.IndexOf(id);
      if (i < 0)
        ThrowInput("{}: stages[{}].{}_layer_id: the profile has no layer '{}'", source, s, what,
                   id);
      index = i;  // ids win over indices
      return;
    }
    if (index < 0 || index >= n)
      ThrowInput("{}: stages[{}].{}_layer: {} is not a layer of the profile (0..{})", source, s,
                 what, index, n - 1);
    id = profile.layers[index].id;
  };
  for (int s = 0; s < plan.num_stages(); ++s) {
    StagePlan& st = plan.stages[s];
    resolve(s, "first", st.first_layer, st.first_layer_id);
    resolve(s, "last", st.last_layer, st.last_layer_id);
    ResolveRecomputeLayers(profile, fmt::format("{}: stages[{}]", source, s), st);
  }
}

void ValidatePlan(const Plan& plan, const Profile& profile, const Cluster& cluster,
                  const std::string& source) {
  CheckMicroBatching(plan, source);
  if (plan.stages.empty()) ThrowInput("{}: stages: the plan has no stages", source);
  const int n = profile.num_layers();
  CheckVirtualStages(plan, n, source);
  std::map<int, int> owner;  // device -> stage
  for (int s = 0; s < plan.num_stages(); ++s) {
    CheckStageLayers(plan, n, source, s);
    CheckStageDevices(plan, cluster, source, s, owner);
    CheckStageSharding(plan, source, s);
  }
  // Re-computation runs the forward again before each backward: without forward times the
  // profile cannot say what that costs (a profile that only has backward or total times).
  for (int s = 0; s < plan.num_stages(); ++s) CheckRecomputeLayers(plan, profile, source, s);
  if (plan.stages.back().last_layer != n - 1)
    ThrowInput(
        "{}: stages[{}].last_layer: {} but the profile's last layer is {} (stages must "
        "cover every layer)",
        source, plan.num_stages() - 1, plan.stages.back().last_layer, n - 1);
  if (plan.estimate && !plan.estimate->stage_peak_memory_bytes.empty() &&
      plan.estimate->stage_peak_memory_bytes.size() != plan.stages.size())
    ThrowInput("{}: estimate.stage_peak_memory_bytes: {} values for {} stages", source,
               plan.estimate->stage_peak_memory_bytes.size(), plan.stages.size());
}

}  // namespace dapple
