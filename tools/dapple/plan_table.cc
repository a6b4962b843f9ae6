// What `dapple plan` prints: see plan_table.h.
#include "plan_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "dapple/common/json_util.h"
#include "dapple/format/cluster.h"
#include "dapple/format/cluster_kinds.h"
#include "dapple/format/plan.h"
#include "dapple/format/profile.h"
#include "dapple/plan/plan_costs.h"

namespace dapple {
namespace {

std::string ServersOf(const Cluster& c, const std::vector<int>& devices) {
  std::vector<int> servers;
  for (int d : devices) {
    int s = c.ServerOf(d);
    if (servers.empty() || servers.back() != s) servers.push_back(s);
  }
  return IdRanges(servers);
}

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

}  // namespace

// What each schedule family buys: the planner's best plan with the schedule fixed to it,
// one row per family, and what it gains over the best DAPPLE (dapple-a/-b) plan.
void PrintFamilies(const std::vector<PlannerRow>& families) {
  if (families.empty()) return;
  double dapple = 0;
  for (const PlannerRow& row : families)
    if (row.result && row.result->plan && row.planner.rfind("dapple-", 0) == 0)
      dapple = dapple == 0 ? row.result->plan->estimate->iteration_ms
                           : std::min(dapple, row.result->plan->estimate->iteration_ms);
  fmt::print("\n{:<12}{:>14}{:>10}{:>14}  {}\n", "schedule", "iteration ms", "speedup",
             "vs dapple-a/b", "plan");
  for (const PlannerRow& row : families) {
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

void PrintTable(const std::string& planner, const Profile& profile, const Cluster& cluster,
                const CostModel& cost, const PlanResult& r, const std::vector<PlannerRow>& rows) {
  const Plan& p = *r.plan;
  const PlanEstimate& e = *p.estimate;
  PlanCosts pc = EvaluatePlan(p, cost);
  fmt::print("{} ({} layers, PBS {}) on {} ({} servers, {} devices), global batch {}\n",
             profile.model, profile.num_layers(), profile.batch_size, cluster.name,
             cluster.num_servers(), cluster.num_devices(), p.global_batch_size);
  fmt::print("plan by {}{}: {} ({:.3f} s to plan, {} plans simulated)\n", planner,
             r.origin.empty() || r.origin == "dapple-dp" || r.origin == planner
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
  for (const PlannerRow& row : rows) {
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

Json RowJson(const PlannerRow& row) {
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

}  // namespace dapple
