// `dapple simulate`: runs a plan on the exact simulator with the analytic cost model and
// prints a table of stages (or JSON), optionally writing the timeline as a Chrome trace
// and an SVG Gantt chart. Input errors are one line and exit code 2, with no output file.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "dapple/common/error.h"
#include "dapple/common/json_util.h"
#include "dapple/common/schedule_kind.h"
#include "dapple/cost/analytic_cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/cluster_kinds.h"
#include "dapple/format/plan.h"
#include "dapple/format/profile.h"
#include "dapple/sim/simulator.h"
#include "dapple/sim/timeline.h"
#include "model_inputs.h"

namespace dapple {
namespace {

struct SimulateArgs {
  ModelInputArgs inputs;
  std::string plan;
  std::optional<std::string> schedule;
  std::optional<std::string> trace;
  std::optional<std::string> svg;
  bool json = false;
  bool no_overlap = false;
  std::optional<double> clip_grad_norm;  // as `dapple train`'s: only its allreduce is timed
  bool steady_state = false;             // also the time per iteration in steady state
};

// An output file's folder must exist before anything runs, so a bad path fails before
// any output is written.
void CheckOutputPath(const std::optional<std::string>& path, const char* flag) {
  if (!path) return;
  std::filesystem::path p(*path);
  if (p.filename().empty()) ThrowInput("{} {}: not a file name", flag, *path);
  std::filesystem::path dir = p.parent_path().empty() ? "." : p.parent_path();
  if (!std::filesystem::is_directory(dir))
    ThrowInput("{} {}: folder {} does not exist", flag, *path, dir.string());
}

// Per stage: the largest peak memory and the mean bubble over its replicas.
struct StageSummary {
  double peak_memory_bytes = 0;
  double peak_activation_bytes = 0;  // of the replica with the largest peak memory
  double memory_bytes = 0;           // the smallest device memory among its replicas
  double bubble_ms = 0;
};

std::vector<StageSummary> Summarise(const Plan& plan, const SimResult& r, const CostModel& cost) {
  std::vector<StageSummary> out(plan.num_stages());
  for (StageSummary& s : out) s.memory_bytes = -1;
  for (const DeviceStats& d : r.devices) {
    StageSummary& s = out[d.stage];
    if (d.peak_memory_bytes >= s.peak_memory_bytes) {
      s.peak_memory_bytes = d.peak_memory_bytes;
      s.peak_activation_bytes = d.peak_activation_bytes;
    }
    double mem = cost.DeviceMemoryBytes(d.device);
    s.memory_bytes = s.memory_bytes < 0 ? mem : std::min(s.memory_bytes, mem);
    s.bubble_ms += d.bubble_ms / plan.stages[d.stage].replicas();
  }
  // With chunks: chunk k runs on the devices of chunk GroupOf(k) (k mod S, or in a V
  // 2S - 1 - k), which the figures are of: their peak memory sums over all their chunks.
  for (int k = plan.num_device_groups(); k < plan.num_stages(); ++k) out[k] = out[plan.GroupOf(k)];
  return out;
}

void PrintSummary(const Profile& profile, const Cluster& cluster, const Plan& plan,
                  const SimResult& r, const std::vector<StageSummary>& sum) {
  fmt::print("{} ({} layers, PBS {}) on {} ({} devices): {}, global batch {} = {} x {}{}\n",
             profile.model, profile.num_layers(), profile.batch_size, cluster.name,
             cluster.num_devices(), ToString(plan.schedule), plan.global_batch_size,
             plan.num_micro_batches, plan.micro_batch_size,
             plan.AnyRecompute() ? ", re-computation" : "");
  const int groups = plan.num_device_groups();
  if (plan.virtual_stages > 1)
    fmt::print(
        "{} chunks per device group: stage k is chunk k of the model, on the devices of stage {} "
        "(mem and bubble are theirs)\n",
        plan.virtual_stages,
        VShaped(plan.schedule) ? fmt::format("k for k < {}, else {} - k", groups, 2 * groups - 1)
                               : fmt::format("k mod {}", groups));
  fmt::print("{:<6}{:<44}{:<14}{:>9}{:>9}{:>9}{:>9}{:>9}{:>16}{:>10}\n", "stage", "layers",
             "devices", "fwd ms", "bwd ms", "send ms", "AR ms", "step ms", "mem GB / dev",
             "bubble");
  for (int s = 0; s < plan.num_stages(); ++s) {
    const StagePlan& st = plan.stages[s];
    const StageStats& ss = r.stages[s];
    std::string layers = fmt::format("{}-{} {} .. {}", st.first_layer, st.last_layer,
                                     Shorten(profile.layers[st.first_layer].name, 14),
                                     Shorten(profile.layers[st.last_layer].name, 14));
    std::string mem =
        fmt::format("{:.2f} / {:.1f}", sum[s].peak_memory_bytes / 1e9, sum[s].memory_bytes / 1e9);
    std::string bubble =
        r.iteration_ms > 0 ? fmt::format("{:.1f}%", 100 * sum[s].bubble_ms / r.iteration_ms) : "-";
    fmt::print("{:<6}{:<44}{:<14}{:>9.3f}{:>9.3f}{:>9.3f}{:>9.3f}{:>9.3f}{:>16}{:>10}\n", s,
               Shorten(layers, 43), Shorten(IdRanges(st.devices), 13), ss.forward_ms,
               ss.backward_ms, ss.send_ms, ss.allreduce_ms, ss.update_ms, mem, bubble);
  }
  fmt::print(
      "(fwd, bwd, send: per micro-batch and replica, send = transfer to the next stage; AR "
      "= allreduce, step = optimizer update: once per iteration)\n");
  if (SplitsBackward(plan.schedule)) {
    fmt::print("{} splits the backward: input gradient I + weight gradient W ms per stage:",
               ToString(plan.schedule));
    for (int s = 0; s < plan.num_stages(); ++s)
      fmt::print(" {:.3f} + {:.3f}", r.stages[s].input_grad_ms, r.stages[s].weight_grad_ms);
    fmt::print("\n");
  }
  for (int s = 0; s < plan.num_stages(); ++s) {
    const StageStats& ss = r.stages[s];
    if (ss.allreduce_buckets == 0) continue;
    fmt::print(
        "stage {}: allreduce in {} bucket{} during the backward, {:.3f} of {:.3f} ms exposed\n", s,
        ss.allreduce_buckets, ss.allreduce_buckets == 1 ? "" : "s", ss.allreduce_exposed_ms,
        ss.allreduce_ms);
  }
  for (int s = 0; s < plan.num_stages(); ++s) {
    if (!plan.stages[s].shard_optimizer) continue;
    fmt::print(
        "stage {}: optimizer state sharded: reduce-scatter {:.3f} ms in the allreduce's place, "
        "update {:.3f} ms, all-gather {:.3f} ms\n",
        s, r.stages[s].allreduce_ms, r.stages[s].update_ms, r.stages[s].allgather_ms);
  }
  if (!plan.allreduce_overlap) fmt::print("allreduce after the last backward (no overlap)\n");
  fmt::print("iteration time   {:.3f} ms\n", r.iteration_ms);
  fmt::print("speedup          {:.3f}x over one device\n", r.speedup);
  fmt::print("bubble fraction  {:.3f}\n", r.bubble_fraction);
}

// The ids of the layers of stage s that re-compute (all of them with whole-stage `recompute`).
std::vector<std::string> RecomputedLayerIds(const Profile& profile, const Plan& plan, int s) {
  std::vector<std::string> ids;
  for (int l : plan.RecomputedLayers(s)) ids.push_back(profile.layers[l].id);
  return ids;
}

Json ResultJson(const Profile& profile, const Cluster& cluster, const Plan& plan,
                const SimResult& r, const std::vector<StageSummary>& sum, const CostModel& cost,
                bool fits) {
  Json j;
  j["model"] = profile.model;
  j["cluster"] = cluster.name;
  j["schedule"] = ToString(plan.schedule);
  j["virtual_stages"] = plan.virtual_stages;
  j["global_batch_size"] = plan.global_batch_size;
  j["micro_batch_size"] = plan.micro_batch_size;
  j["num_micro_batches"] = plan.num_micro_batches;
  j["recompute"] = plan.AnyRecompute();
  j["allreduce_overlap"] = plan.allreduce_overlap;
  j["iteration_ms"] = r.iteration_ms;
  j["speedup"] = r.speedup;
  j["bubble_fraction"] = r.bubble_fraction;
  j["fits_memory"] = fits;
  Json devices = Json::array();
  for (const DeviceStats& d : r.devices) {
    devices.push_back({{"device", d.device},
                       {"stage", d.stage},
                       {"replica", d.replica},
                       {"busy_ms", d.busy_ms},
                       {"bubble_ms", d.bubble_ms},
                       {"static_memory_bytes", d.static_memory_bytes},
                       {"peak_activation_bytes", d.peak_activation_bytes},
                       {"peak_memory_bytes", d.peak_memory_bytes},
                       {"memory_bytes", cost.DeviceMemoryBytes(d.device)},
                       {"process_memory_bytes", cost.ProcessMemoryBytes(d.device)},
                       {"peak_in_flight", d.peak_in_flight}});
  }
  j["devices"] = std::move(devices);
  Json stages = Json::array();
  for (int s = 0; s < plan.num_stages(); ++s) {
    const StagePlan& st = plan.stages[s];
    const StageStats& ss = r.stages[s];
    stages.push_back({{"stage", s},
                      {"first_layer", st.first_layer},
                      {"last_layer", st.last_layer},
                      {"first_layer_id", profile.layers[st.first_layer].id},
                      {"last_layer_id", profile.layers[st.last_layer].id},
                      {"devices", st.devices},
                      {"forward_ms", ss.forward_ms},
                      {"backward_ms", ss.backward_ms},
                      {"input_grad_ms", ss.input_grad_ms},
                      {"weight_grad_ms", ss.weight_grad_ms},
                      {"send_ms", ss.send_ms},
                      {"allreduce_ms", ss.allreduce_ms},
                      {"allreduce_buckets", ss.allreduce_buckets},
                      {"allreduce_exposed_ms", ss.allreduce_exposed_ms},
                      {"update_ms", ss.update_ms},
                      {"shard_optimizer", st.shard_optimizer},
                      {"allgather_ms", ss.allgather_ms},
                      {"peak_memory_bytes", sum[s].peak_memory_bytes},
                      {"peak_activation_bytes", sum[s].peak_activation_bytes},
                      {"recompute_layers", RecomputedLayerIds(profile, plan, s)},
                      {"bubble_ms", sum[s].bubble_ms}});
  }
  j["stages"] = std::move(stages);
  return j;
}

void RunSimulate(const SimulateArgs& a) {
  if (a.clip_grad_norm && !(*a.clip_grad_norm > 0))
    ThrowInput("--clip-grad-norm {}: must be positive", *a.clip_grad_norm);
  CheckOutputPath(a.trace, "--trace");
  CheckOutputPath(a.svg, "--svg");
  ModelInputs in = LoadModelInputs(a.inputs);
  const Profile& profile = in.profile;
  const Cluster& cluster = in.cluster;
  Plan plan = ReadPlanJson(a.plan);
  ResolvePlanLayers(plan, profile, a.plan);
  ValidatePlan(plan, profile, cluster, a.plan);
  if (a.schedule) {
    const ScheduleKind planned = plan.schedule;
    try {
      plan.schedule = ParseScheduleKind(*a.schedule);
    } catch (const InputError& e) {
      ThrowInput("--schedule: {}", e.what());
    }
    CheckChunks(plan.schedule, plan.num_device_groups(), plan.num_micro_batches,
                plan.virtual_stages, "--schedule " + *a.schedule + " with the plan's ");
    // Note [V placement]: the devices of the chunks were validated for the plan's placement.
    if (plan.virtual_stages > 1 && VShaped(planned) != VShaped(plan.schedule))
      ThrowInput("--schedule {}: the plan's chunks are placed for schedule '{}', {}", *a.schedule,
                 ToString(planned), VShaped(planned) ? "in a V" : "not in a V");
  }
  if (a.no_overlap) plan.allreduce_overlap = false;
  CostOptions options = in.cost_options;
  AnalyticCostModel cost(profile, cluster, options);
  SimOptions sim;
  sim.record_timeline = a.trace.has_value() || a.svg.has_value();
  sim.global_norm_allreduce = a.clip_grad_norm.has_value();
  SimResult r = SimulatePlan(plan, cost, sim);

  bool fits = true;
  for (const DeviceStats& d : r.devices) {
    double capacity = cost.DeviceMemoryBytes(d.device);
    if (d.peak_memory_bytes <= capacity) continue;
    if (fits)
      std::fprintf(stderr,
                   "dapple: warning: the plan does not fit memory: device %d (stage %d) needs "
                   "%.2f GB of %.2f GB\n",
                   d.device, d.stage, d.peak_memory_bytes / 1e9, capacity / 1e9);
    fits = false;
  }
  if (sim.record_timeline) {
    r.timeline.title =
        fmt::format("simulated: {} on {}, {}, {} x {}", profile.model, cluster.name,
                    ToString(plan.schedule), plan.num_micro_batches, plan.micro_batch_size);
    if (plan.virtual_stages > 1)
      r.timeline.title += fmt::format(", {} chunks per stage", plan.virtual_stages);
    if (a.trace) WriteChromeTrace({r.timeline}, *a.trace);
    if (a.svg) WriteSvgGantt(r.timeline, *a.svg);
  }
  std::vector<StageSummary> sum = Summarise(plan, r, cost);
  std::optional<SteadyState> steady;
  if (a.steady_state || plan.steady_state) steady = SimulateSteadyState(plan, cost, 2, sim);
  if (a.json) {
    Json j = ResultJson(profile, cluster, plan, r, sum, cost, fits);
    if (steady) j["steady_state_iteration_ms"] = steady->iteration_ms;
    fmt::print("{}\n", j.dump(2));
  } else {
    PrintSummary(profile, cluster, plan, r, sum);
    if (steady)
      fmt::print(
          "steady state     {:.3f} ms per iteration (each stage's next forward after its "
          "own update)\n",
          steady->iteration_ms);
  }
}

}  // namespace

void AddSimulateCommand(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Simulate one training iteration of a plan (exact event-driven simulator)");
  AddModelInputOptions(cmd, args->inputs);
  cmd->add_option("--plan", args->plan, "plan JSON (dapple-plan/1)")->required();
  cmd->add_option("--schedule", args->schedule, "override the plan's schedule: " + ScheduleNames());
  cmd->add_option("--trace", args->trace, "write the timeline as Chrome trace JSON");
  cmd->add_option("--svg", args->svg, "write the timeline as an SVG Gantt chart");
  cmd->add_flag("--json", args->json, "print JSON instead of the table");
  cmd->add_flag("--no-overlap", args->no_overlap,
                "one allreduce after the last backward (the paper), whatever the plan says");
  cmd->add_option("--clip-grad-norm", args->clip_grad_norm,
                  "as `dapple train --clip-grad-norm X`: every device's update waits for one "
                  "scalar allreduce of the global gradient norm (NORM in the timeline)");
  cmd->add_flag("--steady-state", args->steady_state,
                "also print the time per iteration in steady state: two iterations, each "
                "stage's next forward after its own update (docs/schedules.md); on by default "
                "for a plan made with it");
  cmd->callback([args] { RunSimulate(*args); });
}

}  // namespace dapple
