// Plans with chunks (`virtual_stages`, docs/schedules.md "Interleaved 1F1B" and "ZB-V"):
// JSON round trip, and every bad combination is one InputError naming the file and the field.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dapple/common/error.h"
#include "dapple/format/plan.h"

namespace dapple {
namespace {

using ::testing::HasSubstr;

Profile Layers(int n) {
  Profile p;
  p.batch_size = 1;
  for (int i = 0; i < n; ++i) {
    LayerProfile l;
    l.id = fmt::format("a{}", i);
    l.forward_ms = 1;
    p.layers.push_back(l);
  }
  return p;
}

// Two device groups ({0, 1} and {8}) of two chunks each over 8 layers: chunks 0..3 hold
// layers 0-1, 2-3, 4-5, 6-7; chunk 2 runs on chunk 0's devices, chunk 3 on chunk 1's.
Plan Interleaved() {
  Plan plan;
  plan.global_batch_size = 32;
  plan.micro_batch_size = 8;
  plan.num_micro_batches = 4;
  plan.schedule = ScheduleKind::kInterleaved;
  plan.virtual_stages = 2;
  plan.stages = {StagePlan{0, 1, "", "", {0, 1}}, StagePlan{2, 3, "", "", {8}},
                 StagePlan{4, 5, "", "", {0, 1}}, StagePlan{6, 7, "", "", {8}}};
  return plan;
}

std::string InterleavedValidateError(const Plan& plan, int layers = 8) {
  try {
    ValidatePlan(plan, Layers(layers), ClusterPreset("paper-a"), "plan.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(InterleavedPlan, RoundTripsAndCountsDevicesOnce) {
  Plan plan = Interleaved();
  EXPECT_EQ(InterleavedValidateError(plan), "(no error)");
  EXPECT_EQ(plan.num_stages(), 4);
  EXPECT_EQ(plan.num_device_groups(), 2);
  EXPECT_EQ(plan.num_devices(), 3);
  std::string text = PlanToJsonText(plan);
  EXPECT_THAT(text, HasSubstr("\"virtual_stages\": 2"));
  Plan back = ParsePlanJson(text, "plan.json");
  EXPECT_EQ(back.virtual_stages, 2);
  EXPECT_EQ(back.schedule, ScheduleKind::kInterleaved);
  EXPECT_EQ(back.num_stages(), 4);
  // Plans without chunks do not write the field, and read it as 1.
  plan.virtual_stages = 1;
  plan.schedule = ScheduleKind::kDappleA;
  EXPECT_THAT(PlanToJsonText(plan), ::testing::Not(HasSubstr("virtual_stages")));
  EXPECT_EQ(ParsePlanJson(PlanToJsonText(plan), "p").virtual_stages, 1);
}

TEST(InterleavedPlan, BadChunksNameTheField) {
  Plan p = Interleaved();
  p.virtual_stages = 3;  // 4 entries are not 3 chunks of S groups
  EXPECT_EQ(InterleavedValidateError(p),
            "plan.json: virtual_stages: 3 chunks per device group do not divide the 4 entries of "
            "stages (S groups x v chunks)");
  p = Interleaved();
  EXPECT_EQ(InterleavedValidateError(p, 3),
            "plan.json: virtual_stages: 2 x 2 chunks but the profile has only 3 layers");
  p = Interleaved();
  p.schedule = ScheduleKind::kDappleA;
  EXPECT_EQ(InterleavedValidateError(p),
            "plan.json: virtual_stages: 2 chunks per stage need schedule 'interleaved', not "
            "'dapple-a'");
  p = Interleaved();
  p.num_micro_batches = 3;
  p.micro_batch_size = 8;
  p.global_batch_size = 24;
  EXPECT_THAT(InterleavedValidateError(p),
              HasSubstr("plan.json: num_micro_batches: 3 is not a multiple of the 2 stages"));
  p.num_micro_batches = 1;
  p.global_batch_size = 8;
  EXPECT_THAT(InterleavedValidateError(p),
              HasSubstr("plan.json: num_micro_batches: 1 micro-batches are "
                        "fewer than the 2 stages"));
  p = Interleaved();
  p.stages[3].devices = {9};
  EXPECT_EQ(InterleavedValidateError(p),
            "plan.json: stages[3].devices: chunk 3 runs on the devices of chunk 1 "
            "(virtual_stages 2: chunk k on those of chunk k mod 2)");
  p = Interleaved();
  p.stages[1].devices = {1};  // shared by the two groups
  EXPECT_THAT(InterleavedValidateError(p),
              HasSubstr("stages[1].devices[0]: device 1 is already used"));
  p = Interleaved();
  p.stages[2].last_layer = 6;  // chunks must still cover the layers in order
  EXPECT_THAT(InterleavedValidateError(p),
              HasSubstr("stages[3].first_layer: 6 but stage 2 ended at layer 6"));
  EXPECT_THAT(
      [] {
        ParsePlanJson(R"({"format": "dapple-plan/1", "global_batch_size": 8,
      "micro_batch_size": 2, "virtual_stages": 0, "stages": [
        {"first_layer": 0, "last_layer": 9, "devices": [0]}]})",
                      "plan.json");
      },
      ::testing::Throws<InputError>());
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

TEST(InterleavedPlan, ZbVReadsAndValidatesAV) {
  Plan plan = ParsePlanJson(kZbVPlan, "plan.json");
  EXPECT_EQ(plan.schedule, ScheduleKind::kZbV);
  EXPECT_EQ(plan.virtual_stages, 2);
  EXPECT_EQ(InterleavedValidateError(plan, 6), "(no error)");
  EXPECT_EQ(plan.num_device_groups(), 3);
  EXPECT_EQ(plan.num_devices(), 4);
  const int groups[] = {0, 1, 2, 2, 1, 0};
  for (int k = 0; k < 6; ++k) EXPECT_EQ(plan.GroupOf(k), groups[k]) << k;
  Plan back = ParsePlanJson(PlanToJsonText(plan), "again.json");
  EXPECT_EQ(back.schedule, ScheduleKind::kZbV);
  EXPECT_EQ(back.virtual_stages, 2);
  EXPECT_EQ(InterleavedValidateError(back, 6), "(no error)");
}

TEST(InterleavedPlan, ZbVBadShapesNameTheField) {
  Plan p = ParsePlanJson(kZbVPlan, "plan.json");
  p.virtual_stages = 1;
  EXPECT_EQ(InterleavedValidateError(p, 6),
            "plan.json: virtual_stages: schedule 'zb-v' runs 2 chunks per device group (a V), "
            "not 1");
  p.virtual_stages = 3;
  EXPECT_EQ(InterleavedValidateError(p, 6),
            "plan.json: virtual_stages: schedule 'zb-v' runs 2 chunks per device group (a V), "
            "not 3");
  // The looped placement of interleaved 1F1B is not a V.
  p = ParsePlanJson(kZbVPlan, "plan.json");
  p.stages[3].devices = {0, 1};
  p.stages[5].devices = {3};
  EXPECT_EQ(InterleavedValidateError(p, 6),
            "plan.json: stages[3].devices: chunk 3 runs on the devices of chunk 2 (virtual_stages "
            "2: zb-v places chunk k >= 3 on those of chunk 5 - k)");
  // An interleaved plan with the same entries is checked against its own placement.
  p.schedule = ScheduleKind::kInterleaved;
  p.num_micro_batches = 3;
  p.global_batch_size = 6;
  p.stages[4].devices = {2};
  EXPECT_EQ(InterleavedValidateError(p, 6), "(no error)");
}

}  // namespace
}  // namespace dapple
