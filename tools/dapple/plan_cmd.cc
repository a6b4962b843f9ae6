// `dapple plan`: plans a profile on a cluster with the DAPPLE planner (or a baseline),
// prints the plan as a table next to every baseline's figures, and writes the plan JSON.
// No feasible plan (nothing fits in memory) is reported as one line, exit code 2.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
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
#include "dapple/plan/baselines/exhaustive.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/planner.h"
#include "model_inputs.h"

namespace dapple {
namespace {

struct PlanArgs {
  ModelInputArgs inputs;
  int global_batch = 0;
  std::string planner = "dapple";
  std::optional<std::string> schedule;
  std::optional<int> micro_batch;
  std::string output;
  bool json = false;
  bool baselines = true;
  bool overlap = true;        // allreduce overlapped with the backward
  bool steady_state = false;  // choose by the time per iteration in steady state
  long long refine_work = PlannerOptions{}.refine_work;
};

std::string ServersOf(const Cluster& c, const std::vector<int>& devices) {
  std::vector<int> servers;
  for (int d : devices) {
    int s = c.ServerOf(d);
    if (servers.empty() || servers.back() != s) servers.push_back(s);
  }
  return IdRanges(servers);
}

// One line per planner of the comparison.
struct Row {
  std::string planner;
  std::optional<PlanResult> result;
  std::string skipped;  // why there is no result
};

std::string Shape(const Plan& p) {
  std::string r;
  for (int g = 0; g < p.num_device_groups(); ++g)  // with chunks: each group once
    r += (r.empty() ? "" : "+") + std::to_string(p.stages[g].replicas());
  const int S = p.num_device_groups();
  return fmt::format("{} stage{} [{}]{}, m={} x {}, {}", S, S == 1 ? "" : "s", r,
                     p.virtual_stages > 1 ? fmt::format(" x {} chunks", p.virtual_stages) : "",
                     p.micro_batch_size, p.num_micro_batches, ToString(p.schedule));
}

// One line per stage that re-computes: the whole stage, or which of its layers (ids).
std::vector<std::string> RecomputeLines(const Profile& profile, const Plan& p) {
  std::vector<std::string> lines;
  for (int s = 0; s < p.num_stages(); ++s) {
    if (!p.RecomputesAny(s)) continue;
    if (p.Recomputes(s)) {
      lines.push_back(fmt::format("stage {} re-computes all its layers in the backward", s));
      continue;
    }
    std::vector<std::string> ids;
    for (int l : p.stages[s].recompute_layers) ids.push_back(profile.layers[l].id);
    lines.push_back(fmt::format("stage {} re-computes {} of its {} layers in the backward: {}", s,
                                ids.size(), p.stages[s].last_layer - p.stages[s].first_layer + 1,
                                fmt::join(ids, " ")));
  }
  return lines;
}

// Which step found the plan: the proposal it came from and the refinement's moves.
std::string FoundBy(const PlanResult& r) {
  std::string from = r.origin == "dapple-dp" ? "the DP" : "the " + r.origin + " proposal";
  if (r.refine_moves.empty())
    return from + (r.refine_out_of_budget ? " (refinement out of budget)" : "");
  std::map<std::string, int> count;
  std::string moves;
  for (const std::string& m : r.refine_moves) ++count[m];
  for (const auto& [m, n] : count)
    moves += fmt::format("{}{} x{}", moves.empty() ? "" : ", ", m, n);
  return fmt::format("refinement of {} ({} move{}: {}{})", from, r.refine_moves.size(),
                     r.refine_moves.size() == 1 ? "" : "s", moves,
                     r.refine_out_of_budget ? "; out of budget" : "");
}

Row RunOne(PlannerKind planner, const Profile& profile, const Cluster& cluster,
           const CostModel& cost, int gbs, PlannerOptions o) {
  Row row{ToString(planner), std::nullopt, ""};
  if (planner == PlannerKind::kExhaustive &&
      (cost.num_layers() > kExhaustiveMaxLayers || cluster.num_devices() > kExhaustiveMaxDevices)) {
    row.skipped = "skipped: problem too big";
    return row;
  }
  o.planner = planner;
  try {
    row.result = RunPlanner(profile, cluster, cost, gbs, o);
    if (!row.result->plan) row.skipped = row.result->reason;
  } catch (const InputError& e) {
    row.skipped = e.what();
  }
  return row;
}

// What each schedule family buys: the planner's best plan with the schedule fixed to it,
// one row per family, and what it gains over the best DAPPLE (dapple-a/-b) plan.
void PrintFamilies(const std::vector<Row>& families) {
  if (families.empty()) return;
  double dapple = 0;
  for (const Row& row : families)
    if (row.result && row.result->plan && row.planner.rfind("dapple-", 0) == 0)
      dapple = dapple == 0 ? row.result->plan->estimate->iteration_ms
                           : std::min(dapple, row.result->plan->estimate->iteration_ms);
  fmt::print("\n{:<12}{:>14}{:>10}{:>14}  {}\n", "schedule", "iteration ms", "speedup",
             "vs dapple-a/b", "plan");
  for (const Row& row : families) {
    if (!row.result || !row.result->plan) {
      fmt::print("{:<12}{:>14}{:>10}{:>14}  {}\n", row.planner, "-", "-", "-", row.skipped);
      continue;
    }
    const PlanEstimate& e = *row.result->plan->estimate;
    fmt::print("{:<12}{:>14.2f}{:>9.2f}x{:>14}  {}\n", row.planner, e.iteration_ms, e.speedup,
               dapple > 0 ? fmt::format("{:+.1f}%", 100 * (dapple / e.iteration_ms - 1)) : "-",
               Shape(*row.result->plan));
  }
}

void PrintTable(const PlanArgs& a, const Profile& profile, const Cluster& cluster,
                const CostModel& cost, const PlanResult& r, const std::vector<Row>& rows) {
  const Plan& p = *r.plan;
  const PlanEstimate& e = *p.estimate;
  PlanCosts pc = EvaluatePlan(p, cost);
  fmt::print("{} ({} layers, PBS {}) on {} ({} servers, {} devices), global batch {}\n",
             profile.model, profile.num_layers(), profile.batch_size, cluster.name,
             cluster.num_servers(), cluster.num_devices(), p.global_batch_size);
  fmt::print("plan by {}{}: {} ({:.3f} s to plan, {} plans simulated)\n", a.planner,
             r.origin.empty() || r.origin == "dapple-dp" || r.origin == a.planner
                 ? ""
                 : " (the " + r.origin + " partition won)",
             Shape(p), r.planning_seconds, r.plans_simulated);
  fmt::print("found by: {}\n\n", FoundBy(r));
  fmt::print("{:<7}{:<44}{:<14}{:<8}{:>9}{:>9}{:>9}{:>9}{:>10}\n", "stage", "layers", "devices",
             "servers", "fwd ms", "bwd ms", "send ms", "AR ms", "mem GB");
  for (int s = 0; s < p.num_stages(); ++s) {
    const StagePlan& st = p.stages[s];
    std::string layers = fmt::format("{}-{} {} .. {}", st.first_layer, st.last_layer,
                                     Shorten(profile.layers[st.first_layer].name, 14),
                                     Shorten(profile.layers[st.last_layer].name, 14));
    std::string mark = s == e.pivot_stage ? fmt::format("{} *", s) : std::to_string(s);
    fmt::print("{:<7}{:<44}{:<14}{:<8}{:>9.2f}{:>9.2f}{:>9.2f}{:>9.2f}{:>10.2f}\n", mark,
               Shorten(layers, 43), Shorten(IdRanges(st.devices), 13),
               Shorten(ServersOf(cluster, st.devices), 7), pc.stages[s].forward_ms,
               pc.stages[s].backward_ms, s + 1 < p.num_stages() ? pc.transfer_ms[s] : 0.0,
               pc.stages[s].allreduce_ms, e.stage_peak_memory_bytes[s] / 1e9);
  }
  const std::string process =
      cost.ProcessMemoryBytes(0) > 0
          ? fmt::format(" beside the process's own {:.2f} GB", cost.ProcessMemoryBytes(0) / 1e9)
          : "";
  if (MixedDevices(cluster)) {  // the memory and speed of each kind: DeviceKindLines below
    fmt::print("(* pivot stage; times per micro-batch of the slowest replica)\n");
  } else {
    fmt::print(
        "(* pivot stage; times per micro-batch and replica; memory per device: {:.1f} GB for "
        "the stage{})\n",
        cost.DeviceMemoryBytes(0) / 1e9, process);
  }
  for (const std::string& line : DeviceKindLines(cluster, p)) fmt::print("{}\n", line);
  std::vector<int> sharded;
  for (int s = 0; s < p.num_stages(); ++s)
    if (p.stages[s].shard_optimizer) sharded.push_back(s);
  if (!sharded.empty())
    fmt::print(
        "stage{} {} shard{} the optimizer state across {} replicas (AR ms: the reduce-scatter; "
        "the all-gather follows the update)\n",
        sharded.size() == 1 ? "" : "s", IdRanges(sharded), sharded.size() == 1 ? "s" : "",
        sharded.size() == 1 ? "its" : "their");
  for (const std::string& line : RecomputeLines(profile, p)) fmt::print("{}\n", line);
  fmt::print("simulated iteration {:.2f} ms, speedup {:.2f}x (analytic L {:.2f} ms)\n",
             e.iteration_ms, e.speedup, e.latency_ms);
  if (p.num_devices() < cluster.num_devices()) {
    std::vector<bool> used(cluster.num_devices(), false);
    for (const StagePlan& st : p.stages)
      for (int d : st.devices) used[d] = true;
    std::vector<int> unused;
    for (int d = 0; d < cluster.num_devices(); ++d)
      if (!used[d]) unused.push_back(d);
    fmt::print(
        "devices {} unused: more would not be faster ({} of {} train; `dapple train` "
        "leaves the other ranks idle)\n",
        IdRanges(unused), p.num_devices(), cluster.num_devices());
  }
  if (rows.empty()) return;
  fmt::print("\n{:<12}{:>14}{:>10}{:>12}  {}\n", "planner", "iteration ms", "speedup", "planning s",
             "plan");
  for (const Row& row : rows) {
    if (!row.result || !row.result->plan) {
      fmt::print("{:<12}{:>14}{:>10}{:>12}  {}\n", row.planner, "-", "-",
                 row.result ? fmt::format("{:.3f}", row.result->planning_seconds) : "-",
                 row.skipped);
      continue;
    }
    const Plan& q = *row.result->plan;
    fmt::print("{:<12}{:>14.2f}{:>9.2f}x{:>12.3f}  {}\n", row.planner, q.estimate->iteration_ms,
               q.estimate->speedup, row.result->planning_seconds, Shape(q));
  }
}

Json RowJson(const Row& row) {
  Json j;
  j["planner"] = row.planner;
  if (row.result) j["planning_seconds"] = row.result->planning_seconds;
  if (!row.result || !row.result->plan) {
    j["feasible"] = false;
    j["reason"] = row.skipped;
    if (row.result && row.result->required_memory_bytes > 0)
      j["required_memory_bytes"] = row.result->required_memory_bytes;
    return j;
  }
  const Plan& q = *row.result->plan;
  j["feasible"] = true;
  j["iteration_ms"] = q.estimate->iteration_ms;
  j["speedup"] = q.estimate->speedup;
  j["summary"] = Shape(q);
  j["origin"] = row.result->origin;
  j["refine_moves"] = row.result->refine_moves;
  j["plan"] = Json::parse(PlanToJsonText(q));
  return j;
}

// The plan records what it was made from, for re-planning (`dapple train --elastic`): the
// profile's path made absolute, the cluster's preset name (as LoadCluster resolves names
// first) or its path made absolute; and the profile's precision.
void RecordSources(const ModelInputArgs& in, const Profile& profile, Plan& plan) {
  plan.precision = profile.precision;
  plan.profile = std::filesystem::absolute(in.profile).lexically_normal().string();
  std::vector<std::string> names = ClusterPresetNames();
  const bool preset =
      in.cluster == "local" || std::find(names.begin(), names.end(), in.cluster) != names.end();
  plan.cluster =
      preset ? in.cluster : std::filesystem::absolute(in.cluster).lexically_normal().string();
}

PlannerOptions OptionsOf(const PlanArgs& a) {
  PlannerOptions o;
  o.planner = ParsePlannerKind(a.planner);
  if (a.schedule) o.schedule = ParseScheduleKind(*a.schedule);
  o.micro_batch_size = a.micro_batch;
  o.allreduce_overlap = a.overlap;
  o.steady_state = a.steady_state;
  o.refine_work = a.refine_work;
  return o;
}

// No feasible plan: one line (exit code 2), with the memory the leanest plan would need.
[[noreturn]] void ThrowNoPlan(const Profile& profile, const Cluster& cluster, const CostModel& cost,
                              const PlanResult& r) {
  if (r.required_memory_bytes > 0)
    ThrowInput(
        "{} on {}: {} (memory for a stage {:.2f} GB per device; try --memory-gb {:.0f}, more "
        "devices or a smaller global batch)",
        profile.model, cluster.name, r.reason, cost.DeviceMemoryBytes(0) / 1e9,
        std::ceil((r.required_memory_bytes + cost.ProcessMemoryBytes(0)) / 1e9));
  ThrowInput("{} on {}: {}", profile.model, cluster.name, r.reason);
}

// The DAPPLE planner with each schedule family fixed, one row per family: the search's own
// family runs where it made them, zb-h2's from beside the search, the others planned here.
std::vector<Row> FamilyRows(const PlannerOptions& o, const PlanResult& r,
                            const std::optional<Row>& h2_row, const Profile& profile,
                            const Cluster& cluster, const CostModel& cost, int global_batch) {
  std::vector<Row> families;
  for (ScheduleKind k : {ScheduleKind::kDappleA, ScheduleKind::kDappleB, ScheduleKind::kZbH1,
                         ScheduleKind::kZbH2, ScheduleKind::kInterleaved, ScheduleKind::kZbV,
                         ScheduleKind::kVHalf, ScheduleKind::kVMin}) {
    PlannerOptions fixed = o;
    fixed.schedule = k;
    auto done = std::find_if(r.families.begin(), r.families.end(),
                             [&](const PlanResult& f) { return f.family == k; });
    if (done != r.families.end()) {  // the search ran it already
      families.push_back(Row{"dapple", *done, ""});
    } else if (k == ScheduleKind::kZbH2 && h2_row) {  // beside the search
      families.push_back(*h2_row);
    } else {
      families.push_back(RunOne(PlannerKind::kDapple, profile, cluster, cost, global_batch, fixed));
    }
    families.back().planner = ToString(k);
  }
  return families;
}

// `--json`: the plan's figures, every baseline's and every family's.
void PrintJson(const PlanArgs& a, const Profile& profile, const Cluster& cluster,
               const PlanResult& r, const std::vector<Row>& rows,
               const std::vector<Row>& families) {
  Json j;
  j["profile"] = a.inputs.profile;
  j["model"] = profile.model;
  j["cluster"] = cluster.name;
  j["global_batch_size"] = a.global_batch;
  Row self{a.planner, r, ""};
  j["result"] = RowJson(self);
  j["iteration_ms"] = r.plan->estimate->iteration_ms;
  if (a.steady_state) j["steady_state_iteration_ms"] = r.steady_state_iteration_ms;
  j["speedup"] = r.plan->estimate->speedup;
  j["baselines"] = Json::array();
  for (const Row& row : rows) j["baselines"].push_back(RowJson(row));
  j["schedules"] = Json::array();  // the dapple planner with each family fixed
  for (const Row& row : families) j["schedules"].push_back(RowJson(row));
  fmt::print("{}\n", j.dump(2));
}

void RunPlanCommand(const PlanArgs& a) {
  ModelInputs in = LoadModelInputs(a.inputs);
  const Profile& profile = in.profile;
  const Cluster& cluster = in.cluster;
  AnalyticCostModel cost(profile, cluster, in.cost_options);
  PlannerOptions o = OptionsOf(a);
  PlanningMemo memo;  // the baselines' and families' calls reuse this one's DPs and simulations
  o.memo = &memo;
  std::vector<PlannerKind> names;
  if (a.baselines)
    for (PlannerKind k : AllPlanners())
      if (k != o.planner) names.push_back(k);
  // One row per schedule family with the DAPPLE planner's own search. The zb-h2 row searches
  // a schedule that is none of the search's families, so it need not wait for the search: it
  // runs after the baselines' rows, on their thread.
  const bool families_wanted = a.baselines && o.planner == PlannerKind::kDapple && !a.schedule;
  std::optional<Row> h2_row;
  auto baselines = [&, o] {
    std::vector<Row> rows;
    for (PlannerKind name : names)
      rows.push_back(RunOne(name, profile, cluster, cost, a.global_batch, o));
    if (families_wanted) {
      PlannerOptions fixed = o;
      fixed.schedule = ScheduleKind::kZbH2;
      h2_row = RunOne(PlannerKind::kDapple, profile, cluster, cost, a.global_batch, fixed);
    }
    return rows;
  };
  // The baselines' rows on a thread of their own from when the planner has made its
  // proposals, which they find in the memo: beside its searches instead of after them
  // (the planner's searches keep one core busy most of the time, not two). The plans are
  // the same (Note [One memo for several planner calls]).
  // (If the planner throws after that, leaving waits for them.)
  std::future<std::vector<Row>> rows_ahead;
  PlannerOptions main = o;
  if (!names.empty())
    main.proposed = [&] { rows_ahead = std::async(std::launch::async, baselines); };
  PlanResult r = RunPlanner(profile, cluster, cost, a.global_batch, main);
  if (!r.plan) ThrowNoPlan(profile, cluster, cost, r);
  std::vector<Row> rows = rows_ahead.valid() ? rows_ahead.get() : baselines(), families;
  if (families_wanted) families = FamilyRows(o, r, h2_row, profile, cluster, cost, a.global_batch);
  RecordSources(a.inputs, in.profile, *r.plan);
  if (!a.output.empty()) WritePlanJson(*r.plan, a.output);
  if (a.json) {
    PrintJson(a, profile, cluster, r, rows, families);
    return;
  }
  PrintTable(a, profile, cluster, cost, r, rows);
  if (a.steady_state)
    fmt::print(
        "steady state {:.2f} ms per iteration (each stage's next forward after its own "
        "update; chosen by it)\n",
        r.steady_state_iteration_ms);
  PrintFamilies(families);
  if (!a.output.empty()) fmt::print("plan written to {}\n", a.output);
}

}  // namespace

void AddPlanCommand(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Find stages, replication, placement, micro-batch size and schedule for a model");
  AddModelInputOptions(cmd, args->inputs);
  cmd->add_option("--global-batch", args->global_batch, "Samples per iteration (GBS)")->required();
  cmd->add_option("--planner", args->planner,
                  PlannerNames() + " (exhaustive: small problems only)");
  cmd->add_option("--schedule", args->schedule,
                  "Fix the schedule: " + ScheduleNames() + " (default: searched)");
  cmd->add_option("--micro-batch", args->micro_batch, "Fix the micro-batch size m");
  cmd->add_option("-o,--output", args->output, "Write the plan JSON (dapple-plan/1) here");
  cmd->add_flag("--json", args->json, "Print the result and every baseline as JSON");
  cmd->add_flag("!--no-baselines", args->baselines,
                "Do not run the other planners nor the planner per schedule family");
  cmd->add_flag("--steady-state", args->steady_state,
                "Choose by the time per iteration in steady state (consecutive iterations, each "
                "stage's next forward after its own update; offers zb-h2), recorded in the plan");
  cmd->add_flag("!--no-overlap", args->overlap,
                "One allreduce after the last backward (the paper), not buckets during it");
  cmd->add_option("--refine-work", args->refine_work,
                  "Budget of each climb of the local search after the DP, in device steps "
                  "(docs/planner.md; 0: no search): work, not time, so that the plan depends "
                  "on the inputs only")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->callback([args] { RunPlanCommand(*args); });
}

}  // namespace dapple
