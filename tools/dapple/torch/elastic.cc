// The --elastic Replanner: see elastic.h.
#include "elastic.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dapple/common/error.h"
#include "dapple/common/schedule_kind.h"
#include "dapple/cost/analytic_cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"
#include "dapple/format/profile.h"
#include "dapple/plan/planner.h"

namespace dapple {
namespace {

// The first `world` devices of `c` without device `lost`, numbered anew server by server.
Cluster WithoutDevice(const Cluster& c, int world, int lost) {
  Cluster out = c;
  out.name = fmt::format("{} without device {}", c.name, lost);
  out.servers.clear();
  int device = 0;
  for (const ServerSpec& s : c.servers) {
    ServerSpec kept = s;
    kept.devices = 0;
    for (int i = 0; i < s.devices && device < world; ++i, ++device)
      if (device != lost) ++kept.devices;
    if (kept.devices > 0) out.servers.push_back(kept);
  }
  return out;
}

// The value of --plan in a rank's argv ("--plan P" or "--plan=P"); `replace` swaps it.
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

}  // namespace

Replanner MakeElasticReplanner(const ElasticInputs& in, int world_size,
                               const std::vector<std::string>& model_layers) {
  auto profile = std::make_shared<Profile>([&] {
    try {
      return LoadProfile(in.profile);
    } catch (const InputError& e) {
      ThrowInput("--profile: {}", e.what());
    }
  }());
  auto cluster = std::make_shared<Cluster>([&] {
    try {
      return LoadCluster(in.cluster);
    } catch (const InputError& e) {
      ThrowInput("--cluster: {}", e.what());
    }
  }());
  std::vector<std::string> ids;
  for (const LayerProfile& l : profile->layers) ids.push_back(l.id);
  if (ids != model_layers)
    ThrowInput(
        "--profile {}: layers [{}] are not the model's [{}]", in.profile,
        fmt::join(ids.size() > 6 ? std::vector<std::string>(ids.begin(), ids.begin() + 6) : ids,
                  ", "),
        fmt::join(model_layers, ", "));
  if (cluster->num_devices() < world_size)
    ThrowInput("--cluster {}: {} devices, but the job has {} processes", in.cluster,
               cluster->num_devices(), world_size);
  const std::filesystem::path folder = in.plan_folder;
  return [profile, cluster, folder](int lost, LaunchOptions& o) {
    const int world = o.nproc_per_node;
    std::string old_plan = PlanArgument(o.argv, nullptr);
    const int gbs = ReadPlanJson(old_plan).global_batch_size;
    if (world < 2) ThrowInput("--elastic: device {} was lost and no device is left", lost);
    Cluster left = WithoutDevice(*cluster, world, lost);
    AnalyticCostModel cost(*profile, left);
    PlanResult r = RunPlanner(*profile, left, cost, gbs, PlannerOptions{});
    if (!r.plan) ThrowInput("--elastic: no plan fits the {} devices left: {}", world - 1, r.reason);
    const std::filesystem::path path = folder / fmt::format("elastic-plan-{}.json", world - 1);
    WritePlanJson(*r.plan, path);
    std::string shape;
    for (const StagePlan& s : r.plan->stages)
      shape += fmt::format("{}{}", shape.empty() ? "" : ":", s.devices.size());
    std::fprintf(stderr,
                 "dapple train: --elastic: re-planned for %d device%s: %zu stage%s (replicas "
                 "%s), micro-batch %d, %s, %.3f ms per iteration simulated; plan %s\n",
                 world - 1, world - 1 == 1 ? "" : "s", r.plan->stages.size(),
                 r.plan->stages.size() == 1 ? "" : "s", shape.c_str(), r.plan->micro_batch_size,
                 ToString(r.plan->schedule).c_str(), r.plan->estimate->iteration_ms, path.c_str());
    const std::string new_plan = path.string();
    PlanArgument(o.argv, &new_plan);
    o.nproc_per_node = world - 1;
    return true;
  };
}

}  // namespace dapple
