// The --elastic planner: see elastic.h.
#include "elastic.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <system_error>
#include <vector>

#include "dapple/common/error.h"
#include "dapple/common/parse_int.h"
#include "dapple/common/schedule_kind.h"
#include "dapple/cost/analytic_cost_model.h"
#include "dapple/plan/planner.h"

namespace dapple {
namespace {

// The devices `keep` of `c` (ascending indexes), numbered anew server by server.
Cluster OnlyDevices(const Cluster& c, const std::vector<int>& keep) {
  Cluster out = c;
  out.name = fmt::format("{} devices {}", c.name, fmt::join(keep, ","));
  out.servers.clear();
  int device = 0;
  for (const ServerSpec& s : c.servers) {
    ServerSpec kept = s;
    kept.devices = 0;
    for (int i = 0; i < s.devices; ++i, ++device)
      if (std::find(keep.begin(), keep.end(), device) != keep.end()) ++kept.devices;
    if (kept.devices > 0) out.servers.push_back(kept);
  }
  return out;
}

std::string Plural(size_t n, const std::string& word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : word.back() == 's' ? "es" : "s");
}

// The first `n` device indexes.
std::vector<int> FirstDevices(int n) {
  std::vector<int> d(std::max(n, 0));
  for (int i = 0; i < n; ++i) d[i] = i;
  return d;
}

}  // namespace

ElasticInputs WithPlanRecord(ElasticInputs in, const Plan& plan,
                             const std::filesystem::path& plan_path) {
  if (in.profile.empty()) in.profile = plan.profile;
  if (in.cluster.empty()) in.cluster = plan.cluster;
  if (in.profile.empty() || in.cluster.empty())
    ThrowInput(
        "--elastic needs --profile and --cluster: what to plan with for the devices left ({} "
        "records no {})",
        plan_path.string(),
        in.profile.empty() && in.cluster.empty() ? "profile nor cluster"
        : in.profile.empty()                     ? "profile"
                                                 : "cluster");
  return in;
}

ElasticPlanner::ElasticPlanner(const ElasticInputs& in,
                               const std::vector<std::string>& model_layers, int devices_needed)
    : in_(in) {
  try {
    profile_ = LoadProfile(in.profile);
  } catch (const InputError& e) {
    ThrowInput("--profile: {}", e.what());
  }
  try {
    cluster_ = LoadCluster(in.cluster);
  } catch (const InputError& e) {
    ThrowInput("--cluster: {}", e.what());
  }
  std::vector<std::string> ids;
  for (const LayerProfile& l : profile_.layers) ids.push_back(l.id);
  if (ids != model_layers)
    ThrowInput(
        "--profile {}: layers [{}] are not the model's [{}]", in.profile,
        fmt::join(ids.size() > 6 ? std::vector<std::string>(ids.begin(), ids.begin() + 6) : ids,
                  ", "),
        fmt::join(model_layers, ", "));
  if (cluster_.num_devices() < devices_needed)
    ThrowInput("--cluster {}: {} devices, but the job has {} processes", in.cluster,
               cluster_.num_devices(), devices_needed);
}

ElasticPlanner::Result ElasticPlanner::PlanOn(const std::vector<int>& devices, int global_batch,
                                              const std::string& why, bool record) const {
  if (devices.empty()) ThrowInput("--elastic: {}: no devices left", why);
  Cluster left = OnlyDevices(cluster_, devices);
  AnalyticCostModel cost(profile_, left);
  PlannerOptions po;
  po.interleave = in_.interleave;
  PlanResult r = RunPlanner(profile_, left, cost, global_batch, po);
  if (!r.plan)
    ThrowInput("--elastic: {}: no plan fits the {} left: {}", why, Plural(devices.size(), "device"),
               r.reason);
  r.plan->profile = in_.profile;
  r.plan->cluster = in_.cluster;
  r.plan->precision = profile_.precision;
  Result out{*r.plan, in_.plan_folder / fmt::format("elastic-plan-{}.json", devices.size())};
  if (!record) return out;
  std::error_code ec;
  std::filesystem::create_directories(in_.plan_folder, ec);
  WritePlanJson(out.plan, out.path);
  std::string shape;
  for (const StagePlan& s : out.plan.stages)
    shape += fmt::format("{}{}", shape.empty() ? "" : ":", s.devices.size());
  std::fprintf(stderr,
               "dapple train: --elastic: re-planned for %s (%s; the cluster's devices %s): %s "
               "(replicas %s), micro-batch %d, %s, %.3f ms per iteration simulated; plan %s\n",
               Plural(devices.size(), "device").c_str(), why.c_str(),
               fmt::format("{}", fmt::join(devices, ",")).c_str(),
               Plural(out.plan.stages.size(), "stage").c_str(), shape.c_str(),
               out.plan.micro_batch_size, ToString(out.plan.schedule).c_str(),
               out.plan.estimate->iteration_ms, out.path.c_str());
  return out;
}

std::vector<int> ParseDeviceList(const std::string& text, int devices) {
  std::vector<int> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    const int d = ParseWholeInt(item).value_or(-1);
    if (d < 0)
      ThrowInput("--exclude-devices {}: '{}' is not a device index (e.g. 2 or 1,3)", text, item);
    if (d >= devices)
      ThrowInput("--exclude-devices {}: device {} is not one of the job's {} (0-{})", text, d,
                 devices, devices - 1);
    if (std::find(out.begin(), out.end(), d) != out.end())
      ThrowInput("--exclude-devices {}: device {} is named twice", text, d);
    out.push_back(d);
    begin = end + 1;
  }
  return out;
}

std::string PlanArgument(std::vector<std::string>& argv, const std::string* replace) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--plan" && i + 1 < argv.size()) {
      if (replace) argv[i + 1] = *replace;
      return argv[i + 1];
    }
    if (argv[i].rfind("--plan=", 0) == 0) {
      std::string value = argv[i].substr(7);
      if (replace) argv[i] = "--plan=" + *replace;
      return value;
    }
  }
  return "";
}

std::vector<int> ExcludeDevices(const ElasticPlanner& planner, const std::vector<int>& excluded,
                                LaunchOptions& o) {
  std::vector<int> keep;
  for (int d : FirstDevices(o.nproc_per_node))
    if (std::find(excluded.begin(), excluded.end(), d) == excluded.end()) keep.push_back(d);
  const int gbs = ReadPlanJson(PlanArgument(o.argv, nullptr)).global_batch_size;
  const std::string why = fmt::format("{} {} excluded", excluded.size() == 1 ? "device" : "devices",
                                      fmt::join(excluded, ","));
  const std::string plan = planner.PlanOn(keep, gbs, why, /*record=*/true).path.string();
  PlanArgument(o.argv, &plan);
  o.nproc_per_node = static_cast<int>(keep.size());
  return keep;
}

Replanner MakeElasticReplanner(std::shared_ptr<const ElasticPlanner> planner,
                               std::vector<int> in_use) {
  auto devices = std::make_shared<std::vector<int>>(std::move(in_use));
  return [planner, devices](int lost, LaunchOptions& o) {
    DAPPLE_CHECK(lost >= 0 && lost < static_cast<int>(devices->size()));
    const int device = (*devices)[lost];
    devices->erase(devices->begin() + lost);
    const int gbs = ReadPlanJson(PlanArgument(o.argv, nullptr)).global_batch_size;
    const std::string why = fmt::format("device {} was lost", device);
    const std::string plan = planner->PlanOn(*devices, gbs, why, /*record=*/true).path.string();
    PlanArgument(o.argv, &plan);
    o.nproc_per_node = static_cast<int>(devices->size());
    return true;
  };
}

ElasticPlanner::Result PlanForProcesses(const ElasticPlanner& planner, int world, const Plan& plan,
                                        const std::string& plan_path, bool record) {
  const std::string why = fmt::format("the job has {}, but {} uses {}", Plural(world, "process"),
                                      plan_path, Plural(plan.num_devices(), "device"));
  return planner.PlanOn(FirstDevices(world), plan.global_batch_size, why, record);
}

}  // namespace dapple
