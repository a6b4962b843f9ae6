// zb-v plans on the built binary (docs/schedules.md, "ZB-V"): `dapple simulate` runs them
// and reports each chunk's devices' memory (both chunks summed); bad shapes are one line
// naming the field and exit code 2, with no output file.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class VShapeCli : public testing::CliTest {
 protected:
  // BERT-48 (53 layers) in 2S chunks of near-equal layer counts, chunk k on device k for
  // k < S and on device 2S - 1 - k after (or on device k mod S when `looped`).
  std::string Plan(int S, int M, int v = 2, bool looped = false) {
    const int V = 2 * S, n = 53;
    std::string stages;
    for (int k = 0; k < V; ++k) {
      const int device = looped ? k % S : k < S ? k : V - 1 - k;
      stages += fmt::format(R"({}{{"first_layer": {}, "last_layer": {}, "devices": [{}]}})",
                            k ? ", " : "", k * n / V, (k + 1) * n / V - 1, device);
    }
    fs::path p = dir_ / fmt::format("plan_{}_{}_{}_{}.json", S, M, v, looped);
    std::ofstream(p) << fmt::format(
        R"({{"format": "dapple-plan/1", "micro_batch_size": 2, "num_micro_batches": {},
            "schedule": "zb-v", "virtual_stages": {}, "stages": [{}]}})",
        M, v, stages);
    return p.string();
  }
  testing::CliRun Simulate(const std::string& plan, const std::string& flags = "") {
    return Dapple("simulate --profile " + std::string(DAPPLE_DATA_DIR) +
                  "/profiles/dapple/bert-48-pbs-2.txt --cluster paper-b --plan " + plan + " " +
                  flags);
  }
};

TEST_F(VShapeCli, SimulateReportsEachChunksDevices) {
  const int S = 4, M = 8;
  testing::CliRun r = Simulate(Plan(S, M));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("zb-v, global batch 16 = 8 x 2"));
  EXPECT_THAT(r.out, HasSubstr("on the devices of stage k for k < 4, else 7 - k"));
  testing::CliRun j = Simulate(Plan(S, M), "--json");
  ASSERT_EQ(j.code, 0) << j.err;
  nlohmann::json s = nlohmann::json::parse(j.out);
  EXPECT_EQ(s["schedule"], "zb-v");
  EXPECT_EQ(s["virtual_stages"], 2);
  ASSERT_EQ(s["stages"].size(), 2u * S);
  ASSERT_EQ(s["devices"].size(), 1u * S);
  for (int g = 0; g < S; ++g) {
    const nlohmann::json& d = s["devices"][g];
    // 2S chunk-micro-batches at the peak (Note [ZB-V]), of both chunks.
    EXPECT_EQ(d["peak_in_flight"], 2 * S);
    for (int k : {g, 2 * S - 1 - g}) {
      EXPECT_EQ(s["stages"][k]["devices"], nlohmann::json::array({g})) << k;
      EXPECT_EQ(s["stages"][k]["peak_memory_bytes"], d["peak_memory_bytes"]) << k;
    }
  }
}

TEST_F(VShapeCli, BadShapesAreOneLineExitTwo) {
  struct Case {
    std::string plan, message;
  };
  const Case cases[] = {
      {Plan(4, 8, 1),
       "virtual_stages: schedule 'zb-v' runs 2 chunks per device group (a V), not 1"},
      {Plan(4, 8, 2, /*looped=*/true),
       "stages[4].devices: chunk 4 runs on the devices of chunk 3 (virtual_stages 2: zb-v "
       "places chunk k >= 4 on those of chunk 7 - k)"},
  };
  for (const Case& c : cases) {
    fs::path trace = dir_ / "never.json";
    testing::CliRun r = Simulate(c.plan, "--trace " + trace.string());
    EXPECT_EQ(r.code, 2) << c.plan;
    EXPECT_THAT(r.err, HasSubstr(c.plan + ": " + c.message));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(trace));
  }
}

// Switching a plan's schedule between a V and a loop would move its chunks to other
// devices; the planner does not search V shapes.
TEST_F(VShapeCli, RefusesWhatItCannotPlaceOrPlan) {
  testing::CliRun r = Simulate(Plan(4, 8), "--schedule interleaved");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "dapple: error: --schedule interleaved: the plan's chunks are placed for schedule "
            "'zb-v', in a V\n");
  EXPECT_EQ(Simulate(Plan(4, 8), "--schedule zb-v").code, 0);
  testing::CliRun p = Dapple("plan --profile " + std::string(DAPPLE_DATA_DIR) +
                             "/profiles/dapple/bert-48-pbs-2.txt --cluster paper-b --schedule "
                             "zb-v --global-batch 16");
  EXPECT_EQ(p.code, 2);
  EXPECT_EQ(p.err,
            "dapple: error: --schedule zb-v: the planner does not search V-shape schedules yet "
            "(write the plan by hand and run `dapple simulate`)\n");
}

}  // namespace
}  // namespace dapple
