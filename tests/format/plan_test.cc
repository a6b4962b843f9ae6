// Plan JSON: round trip, layer resolution, validation errors.
#include "dapple/format/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Layers "a0".."a9"; a chain.
Profile TenLayers() {
  Profile p;
  p.batch_size = 1;
  for (int i = 0; i < 10; ++i) {
    LayerProfile l;
    l.id = fmt::format("a{}", i);
    l.forward_ms = 1;
    p.layers.push_back(l);
  }
  return p;
}

Plan TwoStages() {
  Plan plan;
  plan.planner = "hand";
  plan.global_batch_size = 64;
  plan.micro_batch_size = 8;
  plan.num_micro_batches = 8;
  plan.schedule = ScheduleKind::kDappleB;
  plan.recompute = true;
  plan.stages = {StagePlan{0, 5, "a0", "a5", {0, 1}}, StagePlan{6, 9, "a6", "a9", {8}}};
  return plan;
}

std::string ValidateError(const Plan& plan) {
  try {
    ValidatePlan(plan, TenLayers(), ClusterPreset("paper-a"), "plan.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string ParseError(const std::string& text) {
  try {
    ParsePlanJson(text, "plan.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Plan, RoundTripWithEstimate) {
  Plan plan = TwoStages();
  plan.estimate = PlanEstimate{123.5, 3.25, 100.25, 1, {1e9, 2.5e9}};
  fs::path path = fs::temp_directory_path() / fmt::format("dapple_plan_{}.json", getpid());
  WritePlanJson(plan, path);
  Plan q = ReadPlanJson(path);
  fs::remove(path);
  EXPECT_EQ(q.planner, "hand");
  EXPECT_EQ(q.global_batch_size, 64);
  EXPECT_EQ(q.micro_batch_size, 8);
  EXPECT_EQ(q.num_micro_batches, 8);
  EXPECT_EQ(q.schedule, ScheduleKind::kDappleB);
  EXPECT_TRUE(q.recompute);
  ASSERT_EQ(q.num_stages(), 2);
  EXPECT_EQ(q.stages[0].devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(q.stages[1].first_layer_id, "a6");
  EXPECT_EQ(q.num_devices(), 3);
  ASSERT_TRUE(q.estimate.has_value());
  EXPECT_EQ(q.estimate->iteration_ms, 123.5);
  EXPECT_EQ(q.estimate->pivot_stage, 1);
  EXPECT_EQ(q.estimate->stage_peak_memory_bytes, (std::vector<double>{1e9, 2.5e9}));
  EXPECT_EQ(PlanToJsonText(q), PlanToJsonText(plan));
  EXPECT_EQ(ValidateError(q), "(no error)");
}

// A plan may record the profile and cluster it was made from (for re-planning); a plan
// without them reads as before, with both empty, and is written without them.
TEST(Plan, RecordsItsProfileAndCluster) {
  Plan plan = TwoStages();
  plan.profile = "/data/bert-48-pbs-2.txt";
  plan.cluster = "paper-a";
  Plan q = ParsePlanJson(PlanToJsonText(plan), "recorded.json");
  EXPECT_EQ(q.profile, "/data/bert-48-pbs-2.txt");
  EXPECT_EQ(q.cluster, "paper-a");
  Plan old = ParsePlanJson(PlanToJsonText(TwoStages()), "old.json");
  EXPECT_EQ(old.profile, "");
  EXPECT_EQ(old.cluster, "");
  EXPECT_EQ(PlanToJsonText(old).find("\"profile\""), std::string::npos);
  plan.cluster.clear();
  EXPECT_NE(PlanToJsonText(plan).find("\"profile\": \"/data/bert-48-pbs-2.txt\""),
            std::string::npos);
  EXPECT_EQ(PlanToJsonText(plan).find("\"cluster\""), std::string::npos);
  try {
    ParsePlanJson(R"({"format": "dapple-plan/1", "global_batch_size": 2, "micro_batch_size": 1,
        "stages": [{"first_layer": 0, "last_layer": 0, "devices": [0]}], "cluster": 4})",
                  "bad.json");
    ADD_FAILURE() << "a cluster that is not a string was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cluster"), std::string::npos) << e.what();
  }
}

// Note [Mixed precision]: a plan records its profile's precision; absent is float32 (older
// files) and is not written; an unknown name is an error naming the field.
TEST(Plan, RecordsItsPrecision) {
  Plan plan = TwoStages();
  plan.precision = Precision::kBf16;
  const std::string text = PlanToJsonText(plan);
  EXPECT_NE(text.find("\"precision\": \"bf16\""), std::string::npos) << text;
  EXPECT_EQ(ParsePlanJson(text, "bf16.json").precision, Precision::kBf16);
  const Plan old = ParsePlanJson(PlanToJsonText(TwoStages()), "old.json");
  EXPECT_EQ(old.precision, Precision::kFloat32);
  EXPECT_EQ(PlanToJsonText(old).find("precision"), std::string::npos);
  Json j = Json::parse(text);
  j["precision"] = "float32";
  EXPECT_EQ(ParsePlanJson(j.dump(), "f32.json").precision, Precision::kFloat32);
  j["precision"] = "fp8";
  EXPECT_THAT(ParseError(j.dump()),
              HasSubstr("plan.json.precision: unknown precision 'fp8' (known: float32, bf16)"));
  j["precision"] = 16;
  EXPECT_THAT(ParseError(j.dump()), HasSubstr("plan.json.precision"));
}

TEST(Plan, PerStageRecompute) {
  // A stage's own flag round-trips; the plan's flag still means every stage (old files).
  Plan plan = TwoStages();
  plan.recompute = false;
  plan.stages[1].recompute = true;
  Plan q = ParsePlanJson(PlanToJsonText(plan), "plan.json");
  EXPECT_FALSE(q.recompute);
  EXPECT_FALSE(q.stages[0].recompute);
  EXPECT_TRUE(q.stages[1].recompute);
  EXPECT_FALSE(q.Recomputes(0));
  EXPECT_TRUE(q.Recomputes(1));
  EXPECT_TRUE(q.AnyRecompute());
  EXPECT_EQ(PlanToJsonText(q), PlanToJsonText(plan));
  Plan old = ParsePlanJson(R"({"format": "dapple-plan/1", "global_batch_size": 8,
      "micro_batch_size": 2, "recompute": true, "stages": [
        {"first_layer": 0, "last_layer": 4, "devices": [0]},
        {"first_layer": 5, "last_layer": 9, "devices": [1]}]})",
                           "plan.json");
  EXPECT_TRUE(old.Recomputes(0));
  EXPECT_TRUE(old.Recomputes(1));
  EXPECT_THAT(ParseError(R"({"format": "dapple-plan/1", "global_batch_size": 8,
      "micro_batch_size": 2, "stages": [
        {"first_layer": 0, "last_layer": 9, "devices": [0], "recompute": 1}]})"),
              HasSubstr("plan.json.stages[0].recompute: expected true or false"));
}

TEST(Plan, RecomputeNeedsForwardTimes) {
  Plan plan = TwoStages();
  plan.recompute = false;
  plan.stages[1].recompute = true;
  EXPECT_EQ(ValidateError(plan), "(no error)");
  Profile p = TenLayers();
  for (int l = 6; l < 10; ++l) p.layers[l].forward_ms = 0;
  try {
    ValidatePlan(plan, p, ClusterPreset("paper-a"), "plan.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("plan.json: stages[1].recompute"));
    EXPECT_THAT(e.what(), HasSubstr("forward"));
  }
  plan.stages[1].recompute = false;  // the other stage has forward times
  plan.stages[0].recompute = true;
  EXPECT_NO_THROW(ValidatePlan(plan, p, ClusterPreset("paper-a"), "plan.json"));
}

TEST(Plan, RecomputeLayersByIdOrIndex) {
  Plan plan = ParsePlanJson(R"({"format": "dapple-plan/1", "global_batch_size": 8,
      "micro_batch_size": 8, "stages": [
        {"first_layer": 0, "last_layer": 5, "devices": [0], "recompute_layers": ["a3", "a1"]},
        {"first_layer": 6, "last_layer": 9, "devices": [1], "recompute_layers": [9, 7, 9]}]})",
                            "plan.json");
  ResolvePlanLayers(plan, TenLayers(), "plan.json");
  ValidatePlan(plan, TenLayers(), ClusterPreset("paper-a"), "plan.json");
  EXPECT_EQ(plan.stages[0].recompute_layers, (std::vector<int>{1, 3}));
  EXPECT_EQ(plan.stages[1].recompute_layers, (std::vector<int>{7, 9}));
  EXPECT_EQ(plan.stages[1].recompute_layer_ids, (std::vector<std::string>{"a7", "a9"}));
  EXPECT_EQ(plan.RecomputedLayers(1), (std::vector<int>{7, 9}));
  EXPECT_TRUE(plan.RecomputesAny(0));
  EXPECT_FALSE(plan.Recomputes(0));
  EXPECT_TRUE(plan.AnyRecompute());
  // Written with ids; read back the same.
  Plan q = ParsePlanJson(PlanToJsonText(plan), "plan.json");
  EXPECT_EQ(q.stages[0].recompute_layer_ids, (std::vector<std::string>{"a1", "a3"}));
  ResolvePlanLayers(q, TenLayers(), "plan.json");
  EXPECT_EQ(q.stages[0].recompute_layers, (std::vector<int>{1, 3}));
  // The whole stage: every layer.
  q.stages[0].recompute = true;
  EXPECT_EQ(q.RecomputedLayers(0), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(Plan, RecomputeLayerOutsideItsStageIsOneLineNamingTheField) {
  Plan plan = TwoStages();
  plan.recompute = false;
  plan.stages[1].recompute_layers = {5};
  try {
    ValidatePlan(plan, TenLayers(), ClusterPreset("paper-a"), "plan.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("plan.json: stages[1].recompute_layers[0]: layer 5 ('a5')"));
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  plan.stages[1].recompute_layers.clear();
  plan.stages[1].recompute_layer_ids = {"zz"};
  try {
    ResolvePlanLayers(plan, TenLayers(), "plan.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("plan.json: stages[1].recompute_layers: the profile has no "
                                    "layer 'zz'"));
  }
}

TEST(Plan, PerStageOptimizerSharding) {
  Plan plan = TwoStages();
  plan.stages[0].shard_optimizer = true;  // 2 replicas
  Plan q = ParsePlanJson(PlanToJsonText(plan), "plan.json");
  EXPECT_TRUE(q.stages[0].shard_optimizer);
  EXPECT_FALSE(q.stages[1].shard_optimizer);
  EXPECT_TRUE(q.AnyShardedOptimizer());
  EXPECT_EQ(PlanToJsonText(q), PlanToJsonText(plan));
  EXPECT_EQ(PlanToJsonText(TwoStages()).find("shard_optimizer"), std::string::npos);
  EXPECT_EQ(ValidateError(plan), "(no error)");
  plan.stages[1].shard_optimizer = true;  // 1 device
  EXPECT_THAT(ValidateError(plan), HasSubstr("plan.json: stages[1].shard_optimizer: the stage "
                                             "has 1 device"));
  EXPECT_THAT(ParseError(R"({"format": "dapple-plan/1", "global_batch_size": 8,
      "micro_batch_size": 2, "stages": [
        {"first_layer": 0, "last_layer": 9, "devices": [0, 1], "shard_optimizer": "yes"}]})"),
              HasSubstr("plan.json.stages[0].shard_optimizer: expected true or false"));
}

TEST(Plan, IdsWinOverIndices) {
  Plan plan = ParsePlanJson(R"({"format": "dapple-plan/1", "global_batch_size": 8,
      "micro_batch_size": 2, "stages": [
        {"first_layer": 0, "last_layer": 1, "last_layer_id": "a3", "devices": [0]},
        {"first_layer_id": "a4", "last_layer": 9, "devices": [1]}]})",
                            "plan.json");
  EXPECT_EQ(plan.num_micro_batches, 4);  // derived from GBS / m
  EXPECT_EQ(plan.schedule, ScheduleKind::kDappleA);
  ResolvePlanLayers(plan, TenLayers(), "plan.json");
  EXPECT_EQ(plan.stages[0].last_layer, 3);
  EXPECT_EQ(plan.stages[0].first_layer_id, "a0");
  EXPECT_EQ(plan.stages[1].first_layer, 4);
  EXPECT_EQ(plan.stages[1].last_layer_id, "a9");
  EXPECT_EQ(ValidateError(plan), "(no error)");

  plan.stages[1].first_layer_id = "zz";
  try {
    ResolvePlanLayers(plan, TenLayers(), "plan.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("plan.json: stages[1].first_layer_id"));
    EXPECT_THAT(e.what(), HasSubstr("'zz'"));
  }
}

TEST(Plan, StagesMustCoverLayersInOrder) {
  Plan overlap = TwoStages();
  overlap.stages[1].first_layer = 4;
  EXPECT_EQ(ValidateError(overlap),
            "plan.json: stages[1].first_layer: 4 but stage 0 ended at layer 5 (stages must "
            "cover the layers in order)");
  Plan skip = TwoStages();
  skip.stages[1].first_layer = 7;
  EXPECT_THAT(ValidateError(skip), HasSubstr("stages[1].first_layer: 7 but stage 0 ended at "
                                             "layer 5"));
  Plan late_start = TwoStages();
  late_start.stages[0].first_layer = 1;
  EXPECT_THAT(ValidateError(late_start), HasSubstr("stages[0].first_layer: 1 but must be 0"));
  Plan short_end = TwoStages();
  short_end.stages[1].last_layer = 8;
  EXPECT_THAT(ValidateError(short_end), HasSubstr("stages[1].last_layer: 8 but the profile's "
                                                  "last layer is 9"));
  Plan empty_stage = TwoStages();
  empty_stage.stages[1].last_layer = 5;
  EXPECT_THAT(ValidateError(empty_stage), HasSubstr("stages[1].last_layer"));
}

TEST(Plan, DevicesMustExistAndNotBeShared) {
  Plan outside = TwoStages();
  outside.stages[1].devices = {16};
  EXPECT_THAT(ValidateError(outside), HasSubstr("plan.json: stages[1].devices[0]: device 16 is "
                                                "not in cluster 'paper-a'"));
  Plan shared = TwoStages();
  shared.stages[1].devices = {2, 1};
  EXPECT_THAT(ValidateError(shared), HasSubstr("plan.json: stages[1].devices[1]: device 1 is "
                                               "already used by stage 0"));
  Plan none = TwoStages();
  none.stages[0].devices.clear();
  EXPECT_THAT(ValidateError(none), HasSubstr("stages[0].devices: must not be empty"));
  Plan too_many = TwoStages();
  too_many.micro_batch_size = 1;
  too_many.num_micro_batches = 64;
  EXPECT_THAT(ValidateError(too_many), HasSubstr("2 replicas but micro_batch_size is 1"));
}

TEST(Plan, GlobalBatchMustBeMTimesM) {
  Plan plan = TwoStages();
  plan.num_micro_batches = 7;
  EXPECT_THAT(ValidateError(plan), HasSubstr("plan.json: global_batch_size: 64 but "
                                             "num_micro_batches x micro_batch_size = 7 x 8"));
  EXPECT_THAT(ParseError(R"({"format": "dapple-plan/1", "global_batch_size": 10,
      "micro_batch_size": 3, "stages": [{"first_layer": 0, "last_layer": 9, "devices": [0]}]})"),
              HasSubstr("plan.json.micro_batch_size: global_batch_size 10 is not divisible by 3"));
  plan = TwoStages();
  plan.micro_batch_size = 0;
  EXPECT_THAT(ValidateError(plan), HasSubstr("micro_batch_size: must be at least 1"));
}

TEST(Plan, ParseErrorsNameTheField) {
  const Json base = Json::parse(PlanToJsonText(TwoStages()));
  auto with = [&](auto edit) {
    Json j = base;
    edit(j);
    return ParseError(j.dump());
  };
  EXPECT_EQ(with([](Json&) {}), "(no error)");
  EXPECT_THAT(ParseError("{\"stages\": [}"), HasSubstr("plan.json: malformed JSON"));
  EXPECT_THAT(with([](Json& j) { j.erase("stages"); }), HasSubstr("plan.json.stages: missing"));
  EXPECT_THAT(with([](Json& j) { j["stages"][1].erase("devices"); }),
              HasSubstr("plan.json.stages[1].devices: missing"));
  EXPECT_THAT(with([](Json& j) { j["stages"][1]["devices"][0] = -3; }),
              HasSubstr("plan.json.stages[1].devices[0]: must not be negative"));
  EXPECT_THAT(with([](Json& j) { j["micro_batch_size"] = -8; }),
              HasSubstr("plan.json.micro_batch_size: must be positive"));
  EXPECT_THAT(with([](Json& j) { j["schedule"] = "zigzag"; }),
              HasSubstr("plan.json.schedule: unknown schedule 'zigzag'"));
  EXPECT_THAT(with([](Json& j) {
                j["stages"][0].erase("first_layer");
                j["stages"][0].erase("first_layer_id");
              }),
              HasSubstr("plan.json.stages[0]: needs first_layer or first_layer_id"));
  EXPECT_THAT(with([](Json& j) {
                j.erase("micro_batch_size");
                j.erase("num_micro_batches");
              }),
              HasSubstr("needs two of"));
  EXPECT_THAT(with([](Json& j) { j["format"] = "dapple-cluster/1"; }),
              HasSubstr("plan.json.format: expected \"dapple-plan/1\""));
}

}  // namespace
}  // namespace dapple
