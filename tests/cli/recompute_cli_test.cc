// Per-stage re-computation on the built binary: `dapple simulate` charges it on the
// stages that ask for it, a flag on a stage whose profile layers have no forward times is
// one line naming the field and exit code 2, and `dapple plan` proposes it for a
// memory-bound BERT-48 (and not with room to spare).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"

namespace dapple {
namespace {

using testing::CliRun;
using ::testing::HasSubstr;

class RecomputeCli : public testing::CliTest {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    std::filesystem::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  // Four layers; the last two without forward times (as a profile that timed only the
  // backward of some layers would have).
  std::string Profile() {
    std::string layers;
    for (int i = 0; i < 4; ++i) {
      layers += fmt::format(
          R"({}{{"id": "l{}", "forward_ms": {}, "backward_ms": 2, "activation_bytes": 1e6,
              "parameter_bytes": 1e6}})",
          i ? ", " : "", i, i < 2 ? 1 : 0);
    }
    return Write("profile.json", R"({"format": "dapple-profile/1", "model": "four",
        "batch_size": 1, "layers": [)" +
                                     layers + "]}");
  }
  // Stage 0 (layers l0, l1) re-computes `layers` of its own (JSON array text).
  std::string PlanWithLayers(const std::string& layers) {
    return Write("plan.json", fmt::format(R"({{"format": "dapple-plan/1", "global_batch_size": 4,
        "micro_batch_size": 1, "schedule": "dapple-a", "stages": [
        {{"first_layer": 0, "last_layer": 1, "devices": [0], "recompute_layers": {}}},
        {{"first_layer": 2, "last_layer": 3, "devices": [1]}}]}})",
                                          layers));
  }
  std::string Plan(bool recompute_first, bool recompute_second) {
    return Write("plan.json", fmt::format(R"({{"format": "dapple-plan/1", "global_batch_size": 4,
        "micro_batch_size": 1, "schedule": "dapple-a", "stages": [
        {{"first_layer": 0, "last_layer": 1, "devices": [0], "recompute": {}}},
        {{"first_layer": 2, "last_layer": 3, "devices": [1], "recompute": {}}}]}})",
                                          recompute_first, recompute_second));
  }
  CliRun Simulate(const std::string& plan) {
    return Dapple("simulate --profile " + Profile() + " --cluster paper-b --json --plan " + plan);
  }
};

TEST_F(RecomputeCli, SimulateChargesTheExtraForwardPerStage) {
  CliRun off = Simulate(Plan(false, false));
  ASSERT_EQ(off.code, 0) << off.err;
  CliRun on = Simulate(Plan(true, false));
  ASSERT_EQ(on.code, 0) << on.err;
  auto a = nlohmann::json::parse(off.out), b = nlohmann::json::parse(on.out);
  EXPECT_EQ(b["recompute"], true);
  // Stage 0 (2 layers, 1 ms forward each): its backward grows by its forward.
  EXPECT_DOUBLE_EQ(b["stages"][0]["backward_ms"].get<double>(),
                   a["stages"][0]["backward_ms"].get<double>() + 2.0);
  EXPECT_DOUBLE_EQ(b["stages"][1]["backward_ms"].get<double>(),
                   a["stages"][1]["backward_ms"].get<double>());
}

TEST_F(RecomputeCli, FlagOnAStageWithoutForwardTimesIsBadInput) {
  CliRun r = Simulate(Plan(false, true));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("plan.json: stages[1].recompute"));
  EXPECT_THAT(r.err, HasSubstr("forward"));
  EXPECT_EQ(r.out, "");
}

TEST_F(RecomputeCli, SimulateReportsTheLayersThatRecomputeAndTheirMemory) {
  CliRun off = Simulate(Plan(false, false));
  ASSERT_EQ(off.code, 0) << off.err;
  CliRun some = Simulate(PlanWithLayers(R"(["l1"])"));
  ASSERT_EQ(some.code, 0) << some.err;
  CliRun by_index = Simulate(PlanWithLayers("[1]"));
  ASSERT_EQ(by_index.code, 0) << by_index.err;
  auto a = nlohmann::json::parse(off.out), b = nlohmann::json::parse(some.out);
  EXPECT_EQ(b["recompute"], true);
  EXPECT_EQ(b["stages"][0]["recompute_layers"], nlohmann::json::array({"l1"}));
  EXPECT_EQ(b["stages"][1]["recompute_layers"], nlohmann::json::array());
  EXPECT_EQ(nlohmann::json::parse(by_index.out)["stages"][0]["recompute_layers"],
            nlohmann::json::array({"l1"}));
  // Layer 1's forward (1 ms) again; it keeps its input (layer 0's 1 MB output) in place of
  // its 1 MB activations, and rebuilds them in the backward: no saving at this size, so
  // the peak is what it was plus nothing, and never above.
  EXPECT_DOUBLE_EQ(b["stages"][0]["backward_ms"].get<double>(),
                   a["stages"][0]["backward_ms"].get<double>() + 1.0);
  EXPECT_GT(a["stages"][0]["peak_activation_bytes"].get<double>(), 0);
  EXPECT_LE(b["stages"][0]["peak_activation_bytes"].get<double>(),
            a["stages"][0]["peak_activation_bytes"].get<double>() + 1e6);
}

TEST_F(RecomputeCli, RecomputeLayerOutsideTheStageIsBadInput) {
  for (const std::string layers : {R"(["l2"])", "[3]", R"(["nope"])"}) {
    CliRun r = Simulate(PlanWithLayers(layers));
    EXPECT_EQ(r.code, 2) << layers;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("plan.json: stages[0].recompute_layers")) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(RecomputeCli, PlanProposesItForAMemoryBoundBert48) {
  const std::string profile = std::string(DAPPLE_DATA_DIR) + "/profiles/dapple/bert-48-pbs-2.txt";
  auto plan = [&](const std::string& memory) {
    CliRun r = Dapple("plan --profile " + profile + " --cluster paper-b --global-batch 64 " +
                      memory + " --no-baselines --json");
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  auto stages_recomputing = [](const nlohmann::json& j) {
    int n = 0;
    for (const auto& s : j["result"]["plan"]["stages"])
      n += s.value("recompute", false) || s.contains("recompute_layers");
    return n;
  };
  EXPECT_EQ(stages_recomputing(plan("")), 0);  // 16 GB: no need
  // At 1.2 GB dapple-b re-computes a stage (the search over every family prefers zb-v there,
  // which fits without: docs/schedules.md, "V-Half and V-Min").
  nlohmann::json tight = plan("--memory-gb 1.2 --schedule dapple-b");
  EXPECT_GT(stages_recomputing(tight), 0);
}

}  // namespace
}  // namespace dapple
