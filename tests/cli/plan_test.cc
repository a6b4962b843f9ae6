// `dapple plan` on the built binary: a plan for BERT-48 on paper-a is written, read back
// and simulated; --json has the baselines; bad input is one line and exit code 2.
#include "dapple/format/plan.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/cli_test_util.h"
#include "dapple/format/cluster.h"
#include "dapple/format/profile.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;
using testing::Slurp;

class PlanCli : public testing::CliTest {
 protected:
  static std::string Profile(const std::string& name) {
    return std::string(DAPPLE_DATA_DIR) + "/profiles/dapple/" + name;
  }
};

using testing::Lines;

TEST_F(PlanCli, Bert48OnPaperAIsWrittenAndSimulated) {
  fs::path plan = dir_ / "plan.json";
  testing::CliRun r = Dapple("plan --profile " + Profile("bert-48-pbs-2.txt") +
                             " --cluster paper-a --global-batch 64 -o " + plan.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("pivot stage"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("speedup"), std::string::npos);
  for (const char* b : {"dp", "straight", "gpipe", "pipedream", "exhaustive"})
    EXPECT_NE(r.out.find(b), std::string::npos) << b;
  ASSERT_TRUE(fs::exists(plan));
  // The file is a valid plan for the profile and the cluster.
  Plan p = ReadPlanJson(plan);
  dapple::Profile prof = LoadProfile(Profile("bert-48-pbs-2.txt"));
  ResolvePlanLayers(p, prof, plan.string());
  EXPECT_NO_THROW(ValidatePlan(p, prof, ClusterPreset("paper-a"), plan.string()));
  EXPECT_EQ(p.global_batch_size, 64);
  // It records what it was made from (for `dapple train --elastic`): the profile's absolute
  // path and the preset's name.
  EXPECT_EQ(p.profile, fs::absolute(Profile("bert-48-pbs-2.txt")).lexically_normal().string());
  EXPECT_EQ(p.cluster, "paper-a");
  ASSERT_TRUE(p.estimate);
  // `dapple simulate` reads it back and finds the planner's time.
  testing::CliRun sim = Dapple("simulate --plan " + plan.string() + " --profile " +
                               Profile("bert-48-pbs-2.txt") + " --cluster paper-a --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  auto j = nlohmann::json::parse(sim.out);
  EXPECT_NEAR(j.at("iteration_ms").get<double>(), p.estimate->iteration_ms,
              1e-6 * p.estimate->iteration_ms);
}

// A link too slow to cross: the plan stays on one server and the table says which devices
// it leaves unused.
TEST_F(PlanCli, UnusedDevicesAreNamed) {
  Cluster c = ClusterPreset("paper-a");
  c.inter_server.bandwidth_bytes_per_s = 1e3;
  c.inter_server.allreduce_bandwidth_bytes_per_s = 1e3;
  fs::path cluster = dir_ / "slow-link.json";
  WriteClusterJson(c, cluster);
  testing::CliRun r =
      Dapple("plan --profile " + Profile("bert-48-pbs-2.txt") + " --cluster " + cluster.string() +
             " --global-batch 64 -o " + (dir_ / "plan.json").string());
  ASSERT_EQ(r.code, 0) << r.err;
  Plan p = ReadPlanJson(dir_ / "plan.json");
  ASSERT_LT(p.num_devices(), 16) << r.out;
  EXPECT_NE(r.out.find("unused: more would not be faster (" + std::to_string(p.num_devices()) +
                       " of 16 train"),
            std::string::npos)
      << r.out;
}

TEST_F(PlanCli, JsonHasThePlanAndEveryBaseline) {
  testing::CliRun r = Dapple("plan --profile " + Profile("vgg-19-pbs-32.txt") +
                             " --cluster paper-b --global-batch 256 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j.at("iteration_ms").get<double>(), 0);
  EXPECT_GT(j.at("speedup").get<double>(), 0);
  ASSERT_EQ(j.at("baselines").size(), 5u);
  for (const auto& b : j.at("baselines")) {
    if (b.at("feasible").get<bool>() && b.at("planner") != "exhaustive") {
      EXPECT_LE(j.at("iteration_ms").get<double>(), b.at("iteration_ms").get<double>() * (1 + 1e-9))
          << b.at("planner");
    }
  }
}

TEST_F(PlanCli, BadInputIsOneLineAndExitTwo) {
  const std::string bert = " --profile " + Profile("bert-48-pbs-2.txt");
  for (const std::string& args : {
           "plan" + bert + " --cluster paper-a --global-batch 64 --planner nope",
           "plan" + bert + " --cluster nowhere --global-batch 64",
           "plan" + bert + " --cluster paper-a --global-batch 0",
           "plan" + bert + " --cluster paper-a --global-batch 8 --planner dp",
           "plan" + bert + " --cluster paper-a --global-batch 64 --micro-batch 3",
           "plan" + bert + " --cluster paper-a --global-batch 64 --schedule fast",
           "plan" + bert + " --cluster paper-a --global-batch 64 --memory-gb 0.5",
           "plan" + bert + " --cluster paper-a --global-batch 64 --planner exhaustive",
       }) {
    testing::CliRun r = Dapple(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(Lines(r.err), 1) << args << "\n" << r.err;
  }
  testing::CliRun mem =
      Dapple("plan" + bert + " --cluster paper-a --global-batch 64 --memory-gb 0.5");
  EXPECT_NE(mem.err.find("no plan fits"), std::string::npos) << mem.err;
  EXPECT_NE(mem.err.find("--memory-gb"), std::string::npos) << mem.err;
}

}  // namespace
}  // namespace dapple

namespace dapple {
namespace {

// What each schedule family buys: one row per family with the planner's best plan under
// it, and the zb-h1 plan simulates with I and W apart. BERT-48 on paper-b at GBS 64 is a
// 16-stage pipeline whose bubble zb-h1 cuts.
TEST_F(PlanCli, PrintsEachScheduleFamilyAndZbH1Simulates) {
  fs::path plan = dir_ / "zb.json";
  testing::CliRun r = Dapple("plan --profile " + Profile("bert-48-pbs-2.txt") +
                             " --cluster paper-b --global-batch 64 --schedule zb-h1 "
                             "--no-baselines -o " +
                             plan.string());
  ASSERT_EQ(r.code, 0) << r.err;
  testing::CliRun all = Dapple("plan --profile " + Profile("bert-48-pbs-2.txt") +
                               " --cluster paper-b --global-batch 64 --json");
  ASSERT_EQ(all.code, 0) << all.err;
  nlohmann::json j = nlohmann::json::parse(all.out);
  // dapple-a, dapple-b, zb-h1, zb-h2, interleaved, zb-v, v-half, v-min
  ASSERT_EQ(j["schedules"].size(), 8u);
  std::map<std::string, double> ms;
  for (const auto& row : j["schedules"]) ms[row["planner"]] = row["iteration_ms"];
  EXPECT_LE(j["iteration_ms"].get<double>(), std::min(ms["dapple-a"], ms["dapple-b"]) * (1 + 1e-9));
  EXPECT_LT(ms["zb-h1"], std::min(ms["dapple-a"], ms["dapple-b"]));
  testing::CliRun sim = Dapple("simulate --profile " + Profile("bert-48-pbs-2.txt") +
                               " --cluster paper-b --plan " + plan.string() + " --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  nlohmann::json s = nlohmann::json::parse(sim.out);
  EXPECT_NEAR(s["iteration_ms"].get<double>(), ms["zb-h1"], 1e-6 * ms["zb-h1"]);
  // No measured split in DAPPLE text: half of each backward with parameters is W.
  EXPECT_GT(s["stages"][1]["weight_grad_ms"].get<double>(), 0);
  EXPECT_NEAR(s["stages"][1]["input_grad_ms"].get<double>() +
                  s["stages"][1]["weight_grad_ms"].get<double>(),
              s["stages"][1]["backward_ms"].get<double>(), 1e-9);
  testing::CliRun bad =
      Dapple("simulate --profile " + Profile("bert-48-pbs-2.txt") + " --cluster paper-b --plan " +
             plan.string() + " --weight-grad-share 1.5");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err, "dapple: error: --weight-grad-share: must be in [0, 1], got 1.5\n");
}

// `dapple plan --steady-state` records it in the plan; `dapple simulate` then reports the time
// per iteration in steady state (as with --steady-state on any plan), never more than a cold
// start's (docs/schedules.md, "ZB-H2 and steady state").
TEST_F(PlanCli, SteadyStateIsRecordedAndSimulated) {
  fs::path plan = dir_ / "steady.json";
  testing::CliRun r = Dapple("plan --profile " + Profile("bert-48-pbs-2.txt") +
                             " --cluster paper-b --global-batch 16 --steady-state --no-baselines "
                             "-o " +
                             plan.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("steady state "), std::string::npos) << r.out;
  std::ifstream in(plan);
  nlohmann::json written = nlohmann::json::parse(in);
  EXPECT_EQ(written["steady_state"], true);
  testing::CliRun sim = Dapple("simulate --profile " + Profile("bert-48-pbs-2.txt") +
                               " --cluster paper-b --plan " + plan.string() + " --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  nlohmann::json s = nlohmann::json::parse(sim.out);
  ASSERT_TRUE(s.contains("steady_state_iteration_ms")) << sim.out;
  EXPECT_LE(s["steady_state_iteration_ms"].get<double>(), s["iteration_ms"].get<double>());
  EXPECT_GT(s["steady_state_iteration_ms"].get<double>(), 0);
}

// Note [Mixed precision]: the plan records the precision of the profile it was made from
// (`dapple train` warns when it trains in another); a float32 profile's plan has no field.
TEST_F(PlanCli, RecordsTheProfilesPrecision) {
  dapple::Profile prof = LoadProfile(Profile("bert-48-pbs-2.txt"));
  for (Precision precision : {Precision::kBf16, Precision::kFloat32}) {
    prof.precision = precision;
    const fs::path profile = dir_ / ("profile-" + ToString(precision) + ".json");
    WriteProfileJson(prof, profile);
    const fs::path plan = dir_ / ("plan-" + ToString(precision) + ".json");
    testing::CliRun r =
        Dapple("plan --profile " + profile.string() +
               " --cluster paper-a --global-batch 64 --no-baselines -o " + plan.string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(ReadPlanJson(plan).precision, precision);
    EXPECT_EQ(Slurp(plan).find("\"precision\"") != std::string::npos,
              precision == Precision::kBf16);
  }
}

}  // namespace
}  // namespace dapple
