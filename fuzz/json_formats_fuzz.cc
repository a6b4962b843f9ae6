// libFuzzer target: the profile, cluster and plan JSON readers, and plan validation against
// a small profile and cluster. InputError is the only acceptable failure; any other
// exception, crash or sanitizer report is a bug. What parses must write and parse back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cost_probe.h"
#include "dapple/common/error.h"
#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"
#include "dapple/format/profile.h"

namespace {

const dapple::Profile& SmallProfile() {
  static const dapple::Profile p = [] {
    dapple::Profile q;
    q.batch_size = 2;
    for (int i = 0; i < 6; ++i) {
      dapple::LayerProfile l;
      l.id = "node" + std::to_string(i);
      q.layers.push_back(l);
    }
    return q;
  }();
  return p;
}

void FuzzProfile(const std::string& text) {
  dapple::Profile p;
  try {
    p = dapple::ParseProfileJson(text, "fuzz.json");
  } catch (const dapple::InputError&) {
    return;
  }
  for (int i = 0; i < p.num_layers(); ++i) (void)p.CutBytes(i);
  dapple::fuzz::ProbeCostModel(p);
  dapple::Profile q = dapple::ParseProfileJson(dapple::ProfileToJsonText(p), "again.json");
  if (q.num_layers() != p.num_layers() || q.edges != p.edges) abort();
}

void FuzzCluster(const std::string& text) {
  dapple::Cluster c;
  try {
    c = dapple::ParseClusterJson(text, "fuzz.json");
  } catch (const dapple::InputError&) {
    return;
  }
  for (int d = 0; d < c.num_devices(); d += 1 + c.num_devices() / 64) (void)c.Device(d);
  dapple::Cluster again = dapple::ParseClusterJson(dapple::ClusterToJsonText(c), "again.json");
  if (again.num_devices() != c.num_devices()) abort();
}

void FuzzPlan(const std::string& text) {
  dapple::Plan plan;
  try {
    plan = dapple::ParsePlanJson(text, "fuzz.json");
  } catch (const dapple::InputError&) {
    return;
  }
  dapple::Plan again = dapple::ParsePlanJson(dapple::PlanToJsonText(plan), "again.json");
  if (again.num_stages() != plan.num_stages()) abort();
  try {
    dapple::ResolvePlanLayers(plan, SmallProfile(), "fuzz.json");
    dapple::ValidatePlan(plan, SmallProfile(), dapple::ClusterPreset("paper-a"), "fuzz.json");
  } catch (const dapple::InputError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  FuzzProfile(text);
  FuzzCluster(text);
  FuzzPlan(text);
  return 0;
}
