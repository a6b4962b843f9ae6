// Plans with chunks (interleaved, and the V shapes) on the built binary: `dapple simulate`
// runs them and names the chunks (table, JSON, trace); bad chunk counts, placements or
// micro-batch counts are one line naming the field and exit code 2, with no output file.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class InterleavedCli : public testing::CliTest {
 protected:
  // BERT-48 (53 layers) in S x v chunks (or `entries`) of near-equal layer counts, chunk k
  // on device k mod S.
  std::string Plan(int S, int v, int M, int entries = 0) {
    std::vector<int> devices(entries > 0 ? entries : S * v);
    for (int k = 0; k < static_cast<int>(devices.size()); ++k) devices[k] = k % S;
    return Write("interleaved", v, M, devices);
  }
  // zb-v: 2S chunks, chunk k on device k for k < S and on device 2S - 1 - k after (Note [V
  // placement]), or on device k mod S when `looped`.
  std::string VPlan(int S, int M, int v = 2, bool looped = false) {
    std::vector<int> devices(2 * S);
    for (int k = 0; k < 2 * S; ++k) devices[k] = looped ? k % S : k < S ? k : 2 * S - 1 - k;
    return Write("zb-v", v, M, devices);
  }
  // Entry k of `stages` on devices[k], the 53 layers in near-equal runs.
  std::string Write(const std::string& schedule, int v, int M, const std::vector<int>& devices) {
    const int V = static_cast<int>(devices.size()), n = 53;
    std::string stages;
    for (int k = 0; k < V; ++k) {  // more chunks than layers: one layer each, then the last
      const int first = V > n ? std::min(k, n - 1) : k * n / V;
      const int last = V > n ? first : (k + 1) * n / V - 1;
      stages += fmt::format(R"({}{{"first_layer": {}, "last_layer": {}, "devices": [{}]}})",
                            k ? ", " : "", first, last, devices[k]);
    }
    fs::path p = dir_ / fmt::format("plan_{}_{}.json", schedule, ++plans_);
    std::ofstream(p) << fmt::format(
        R"({{"format": "dapple-plan/1", "micro_batch_size": 2, "num_micro_batches": {},
            "schedule": "{}", "virtual_stages": {}, "stages": [{}]}})",
        M, schedule, v, stages);
    return p.string();
  }
  testing::CliRun Simulate(const std::string& plan, const std::string& flags = "") {
    return Dapple("simulate --profile " + std::string(DAPPLE_DATA_DIR) +
                  "/profiles/dapple/bert-48-pbs-2.txt --cluster paper-b --plan " + plan + " " +
                  flags);
  }
  int plans_ = 0;  // plan files written
};

TEST_F(InterleavedCli, SimulateNamesTheChunks) {
  fs::path trace = dir_ / "t.json";
  testing::CliRun r = Simulate(Plan(4, 2, 8), "--trace " + trace.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("interleaved, global batch 16 = 8 x 2"));
  EXPECT_THAT(r.out, HasSubstr("2 chunks per device group: stage k is chunk k of the model"));
  std::string t = testing::Slurp(trace);
  EXPECT_THAT(t, HasSubstr("\"F0c1\""));
  EXPECT_THAT(t, HasSubstr("2 chunks per stage"));
  testing::CliRun j = Simulate(Plan(4, 2, 8), "--json");
  ASSERT_EQ(j.code, 0) << j.err;
  nlohmann::json s = nlohmann::json::parse(j.out);
  EXPECT_EQ(s["virtual_stages"], 2);
  EXPECT_EQ(s["stages"].size(), 8u);
  EXPECT_EQ(s["devices"].size(), 4u);
  // Four devices hold two chunks each: chunk k's devices are chunk k mod 4's.
  EXPECT_EQ(s["stages"][5]["devices"], s["stages"][1]["devices"]);
}

TEST_F(InterleavedCli, BadChunksAreOneLineExitTwo) {
  struct Case {
    std::string plan, message;
  };
  const Case cases[] = {
      {Plan(4, 2, 6),
       "num_micro_batches: 6 is not a multiple of the 4 stages (interleaved 1F1B sends "
       "micro-batches round in groups of one per stage)"},
      {Plan(4, 2, 2), "num_micro_batches: 2 micro-batches are fewer than the 4 stages"},
      {Plan(4, 3, 8, /*entries=*/8),
       "virtual_stages: 3 chunks per device group do not divide the 8 entries of stages"},
      {Plan(4, 16, 8, /*entries=*/64),
       "virtual_stages: 4 x 16 chunks but the profile has only "
       "53 layers"},
      {VPlan(4, 8, 1),
       "virtual_stages: schedule 'zb-v' runs 2 chunks per device group (a V), not 1"},
      {VPlan(4, 8, 2, /*looped=*/true),
       "stages[4].devices: chunk 4 runs on the devices of chunk 3 (virtual_stages 2: zb-v "
       "places chunk k >= 4 on those of chunk 7 - k)"},
  };
  for (const Case& c : cases) {
    fs::path trace = dir_ / "never.json";
    testing::CliRun r = Simulate(c.plan, "--trace " + trace.string());
    EXPECT_EQ(r.code, 2) << c.plan;
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_THAT(r.err, HasSubstr(c.plan + ": "));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(trace));
  }
}

// zb-v (docs/schedules.md, "ZB-V"): each chunk's devices and their memory (both chunks
// summed) in the report.
TEST_F(InterleavedCli, ZbVReportsEachChunksDevices) {
  const int S = 4, M = 8;
  testing::CliRun r = Simulate(VPlan(S, M));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("zb-v, global batch 16 = 8 x 2"));
  EXPECT_THAT(r.out, HasSubstr("on the devices of stage k for k < 4, else 7 - k"));
  testing::CliRun j = Simulate(VPlan(S, M), "--json");
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

// Switching a plan's schedule between a V and a loop would move its chunks to other
// devices; between the V-shape schedules it keeps them. `dapple plan --schedule v-half` writes a
// V-shape plan that `dapple simulate` reads back.
TEST_F(InterleavedCli, VShapesKeepTheirPlacementAndArePlanned) {
  testing::CliRun r = Simulate(VPlan(4, 8), "--schedule interleaved");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "dapple: error: --schedule interleaved: the plan's chunks are placed for schedule "
            "'zb-v', in a V\n");
  EXPECT_EQ(Simulate(VPlan(4, 8), "--schedule zb-v").code, 0);
  EXPECT_EQ(Simulate(VPlan(4, 8), "--schedule v-min").code, 0);
  const fs::path out = dir_ / "planned.json";
  testing::CliRun p = Dapple("plan --profile " + std::string(DAPPLE_DATA_DIR) +
                             "/profiles/dapple/bert-48-pbs-2.txt --cluster paper-b --schedule "
                             "v-half --global-batch 16 --no-baselines -o " +
                             out.string());
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_THAT(p.out, HasSubstr("v-half"));
  testing::CliRun j = Simulate(out.string(), "--json");
  ASSERT_EQ(j.code, 0) << j.err;
  nlohmann::json s = nlohmann::json::parse(j.out);
  EXPECT_EQ(s["schedule"], "v-half");
  EXPECT_EQ(s["virtual_stages"], 2);
  const int S = static_cast<int>(s["stages"].size()) / 2;
  for (int k = S; k < 2 * S; ++k)  // chunk k on the devices of chunk 2S - 1 - k
    EXPECT_EQ(s["stages"][k]["devices"], s["stages"][2 * S - 1 - k]["devices"]) << k;
}

}  // namespace
}  // namespace dapple
