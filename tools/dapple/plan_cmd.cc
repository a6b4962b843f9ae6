// `dapple plan`: plans a profile on a cluster with the DAPPLE planner (or a baseline),
// prints the plan as a table next to every baseline's figures, and writes the plan JSON.
// No feasible plan (nothing fits in memory) is reported as one line, exit code 2.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>
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
#include "dapple/format/plan.h"
#include "dapple/format/profile.h"
#include "dapple/plan/baselines/exhaustive.h"
#include "dapple/plan/planner.h"
#include "model_inputs.h"
#include "plan_table.h"

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

PlannerRow RunOne(PlannerKind planner, const Profile& profile, const Cluster& cluster,
                  const CostModel& cost, int gbs, PlannerOptions o) {
  PlannerRow row{ToString(planner), std::nullopt, ""};
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
std::vector<PlannerRow> FamilyRows(const PlannerOptions& o, const PlanResult& r,
                                   const std::optional<PlannerRow>& h2_row, const Profile& profile,
                                   const Cluster& cluster, const CostModel& cost,
                                   int global_batch) {
  std::vector<PlannerRow> families;
  for (ScheduleKind k : {ScheduleKind::kDappleA, ScheduleKind::kDappleB, ScheduleKind::kZbH1,
                         ScheduleKind::kZbH2, ScheduleKind::kInterleaved, ScheduleKind::kZbV,
                         ScheduleKind::kVHalf, ScheduleKind::kVMin}) {
    PlannerOptions fixed = o;
    fixed.schedule = k;
    auto done = std::find_if(r.families.begin(), r.families.end(),
                             [&](const PlanResult& f) { return f.family == k; });
    if (done != r.families.end()) {  // the search ran it already
      families.push_back(PlannerRow{"dapple", *done, ""});
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
               const PlanResult& r, const std::vector<PlannerRow>& rows,
               const std::vector<PlannerRow>& families) {
  Json j;
  j["profile"] = a.inputs.profile;
  j["model"] = profile.model;
  j["cluster"] = cluster.name;
  j["global_batch_size"] = a.global_batch;
  PlannerRow self{a.planner, r, ""};
  j["result"] = RowJson(self);
  j["iteration_ms"] = r.plan->estimate->iteration_ms;
  if (a.steady_state) j["steady_state_iteration_ms"] = r.steady_state_iteration_ms;
  j["speedup"] = r.plan->estimate->speedup;
  j["baselines"] = Json::array();
  for (const PlannerRow& row : rows) j["baselines"].push_back(RowJson(row));
  j["schedules"] = Json::array();  // the dapple planner with each family fixed
  for (const PlannerRow& row : families) j["schedules"].push_back(RowJson(row));
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
  std::optional<PlannerRow> h2_row;
  auto baselines = [&, o] {
    std::vector<PlannerRow> rows;
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
  std::future<std::vector<PlannerRow>> rows_ahead;
  PlannerOptions main = o;
  if (!names.empty())
    main.proposed = [&] { rows_ahead = std::async(std::launch::async, baselines); };
  PlanResult r = RunPlanner(profile, cluster, cost, a.global_batch, main);
  if (!r.plan) ThrowNoPlan(profile, cluster, cost, r);
  std::vector<PlannerRow> rows = rows_ahead.valid() ? rows_ahead.get() : baselines(), families;
  if (families_wanted) families = FamilyRows(o, r, h2_row, profile, cluster, cost, a.global_batch);
  RecordSources(a.inputs, in.profile, *r.plan);
  if (!a.output.empty()) WritePlanJson(*r.plan, a.output);
  if (a.json) {
    PrintJson(a, profile, cluster, r, rows, families);
    return;
  }
  PrintTable(a.planner, profile, cluster, cost, r, rows);
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
