// Plans of the V-shape schedules (docs/schedules.md, "ZB-V"): two chunks per device group
// in a V, read from JSON and validated; every other shape is one InputError naming the
// file and the field.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dapple/common/error.h"
#include "dapple/format/plan.h"

namespace dapple {
namespace {

Profile SixLayers() {
  Profile p;
  p.batch_size = 1;
  for (int i = 0; i < 6; ++i) {
    LayerProfile l;
    l.id = fmt::format("l{}", i);
    l.forward_ms = 1;
    p.layers.push_back(l);
  }
  return p;
}

// Three groups ({0, 1}, {2}, {3}) of two one-layer chunks in a V: chunks 0, 1, 2 on
// groups 0, 1, 2 and chunks 3, 4, 5 back on groups 2, 1, 0.
constexpr const char* kZbVPlan = R"({
  "format": "dapple-plan/1", "planner": "hand", "global_batch_size": 8,
  "micro_batch_size": 2, "num_micro_batches": 4, "schedule": "zb-v", "virtual_stages": 2,
  "stages": [
    {"first_layer": 0, "last_layer": 0, "devices": [0, 1]},
    {"first_layer": 1, "last_layer": 1, "devices": [2]},
    {"first_layer": 2, "last_layer": 2, "devices": [3]},
    {"first_layer": 3, "last_layer": 3, "devices": [3]},
    {"first_layer": 4, "last_layer": 4, "devices": [2]},
    {"first_layer": 5, "last_layer": 5, "devices": [0, 1]}
  ]
})";

std::string ValidateError(const Plan& plan) {
  try {
    ValidatePlan(plan, SixLayers(), ClusterPreset("paper-a"), "plan.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(VShapePlan, ReadsAndValidatesAV) {
  Plan plan = ParsePlanJson(kZbVPlan, "plan.json");
  EXPECT_EQ(plan.schedule, ScheduleKind::kZbV);
  EXPECT_EQ(plan.virtual_stages, 2);
  EXPECT_EQ(ValidateError(plan), "(no error)");
  EXPECT_EQ(plan.num_device_groups(), 3);
  EXPECT_EQ(plan.num_devices(), 4);
  const int groups[] = {0, 1, 2, 2, 1, 0};
  for (int k = 0; k < 6; ++k) EXPECT_EQ(plan.GroupOf(k), groups[k]) << k;
  Plan back = ParsePlanJson(PlanToJsonText(plan), "again.json");
  EXPECT_EQ(back.schedule, ScheduleKind::kZbV);
  EXPECT_EQ(back.virtual_stages, 2);
  EXPECT_EQ(ValidateError(back), "(no error)");
}

TEST(VShapePlan, BadShapesNameTheField) {
  Plan p = ParsePlanJson(kZbVPlan, "plan.json");
  p.virtual_stages = 1;
  EXPECT_EQ(ValidateError(p),
            "plan.json: virtual_stages: schedule 'zb-v' runs 2 chunks per device group (a V), "
            "not 1");
  p.virtual_stages = 3;
  EXPECT_EQ(ValidateError(p),
            "plan.json: virtual_stages: schedule 'zb-v' runs 2 chunks per device group (a V), "
            "not 3");
  // The looped placement of interleaved 1F1B is not a V.
  p = ParsePlanJson(kZbVPlan, "plan.json");
  p.stages[3].devices = {0, 1};
  p.stages[5].devices = {3};
  EXPECT_EQ(ValidateError(p),
            "plan.json: stages[3].devices: chunk 3 runs on the devices of chunk 2 (virtual_stages "
            "2: zb-v places chunk k >= 3 on those of chunk 5 - k)");
  // An interleaved plan with the same entries is checked against its own placement.
  p.schedule = ScheduleKind::kInterleaved;
  p.num_micro_batches = 3;
  p.global_batch_size = 6;
  p.stages[4].devices = {2};
  EXPECT_EQ(ValidateError(p), "(no error)");
}

}  // namespace
}  // namespace dapple
