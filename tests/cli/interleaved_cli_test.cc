// Interleaved plans on the built binary: `dapple simulate` runs them and names the chunks
// (table, JSON, trace); bad chunk counts or micro-batch counts are one line naming the field
// and exit code 2, with no output file.
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
    const int V = entries > 0 ? entries : S * v, n = 53;
    std::string stages;
    for (int k = 0; k < V; ++k) {  // more chunks than layers: one layer each, then the last
      const int first = V > n ? std::min(k, n - 1) : k * n / V;
      const int last = V > n ? first : (k + 1) * n / V - 1;
      stages += fmt::format(R"({}{{"first_layer": {}, "last_layer": {}, "devices": [{}]}})",
                            k ? ", " : "", first, last, k % S);
    }
    fs::path p = dir_ / fmt::format("plan_{}_{}_{}_{}.json", S, v, M, V);
    std::ofstream(p) << fmt::format(
        R"({{"format": "dapple-plan/1", "micro_batch_size": 2, "num_micro_batches": {},
            "schedule": "interleaved", "virtual_stages": {}, "stages": [{}]}})",
        M, v, stages);
    return p.string();
  }
  testing::CliRun Simulate(const std::string& plan, const std::string& flags = "") {
    return Dapple("simulate --profile " + std::string(DAPPLE_DATA_DIR) +
                  "/profiles/dapple/bert-48-pbs-2.txt --cluster paper-b --plan " + plan + " " +
                  flags);
  }
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

}  // namespace
}  // namespace dapple
