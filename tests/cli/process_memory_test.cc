// Note [Process memory] end to end: a cluster whose devices give part of their memory to the
// training process itself (`process_memory_bytes`) leaves the stages less; `dapple plan`
// plans within what is left and records the process's share in the plan's estimate, and
// `dapple simulate` judges memory the same way.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_test_util.h"
#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;

class ProcessMemoryCli : public testing::CliTest {
 protected:
  static std::string Bert48() {
    return std::string(DAPPLE_DATA_DIR) + "/profiles/dapple/bert-48-pbs-2.txt";
  }
  fs::path WriteCluster(const std::string& name, double process_bytes) {
    Cluster c = ClusterPreset("paper-a");
    c.name = name;
    c.device.process_memory_bytes = process_bytes;
    fs::path path = dir_ / (name + ".json");
    WriteClusterJson(c, path);
    return path;
  }
  Plan PlanOn(const fs::path& cluster, const std::string& out) {
    fs::path plan = dir_ / out;
    testing::CliRun r = Dapple("plan --profile " + Bert48() + " --cluster " + cluster.string() +
                               " --global-batch 64 --no-baselines -o " + plan.string());
    EXPECT_EQ(r.code, 0) << r.err;
    return ReadPlanJson(plan);
  }
};

double Peak(const Plan& p) {
  return *std::max_element(p.estimate->stage_peak_memory_bytes.begin(),
                           p.estimate->stage_peak_memory_bytes.end());
}

TEST_F(ProcessMemoryCli, PlansWithinWhatTheProcessLeaves) {
  const double device = ClusterPreset("paper-a").device.memory_bytes;
  Plan free_plan = PlanOn(WriteCluster("whole", 0), "whole-plan.json");
  ASSERT_TRUE(free_plan.estimate);
  EXPECT_EQ(free_plan.estimate->process_memory_bytes, 0);
  // A process that takes all but 90% of that plan's largest stage: the plan no longer fits.
  const double process = device - 0.9 * Peak(free_plan);
  fs::path tight = WriteCluster("tight", process);
  Plan plan = PlanOn(tight, "tight-plan.json");
  ASSERT_TRUE(plan.estimate);
  EXPECT_EQ(plan.estimate->process_memory_bytes, process);
  EXPECT_LE(Peak(plan), device - process);

  // simulate: the first plan does not fit the tight devices, the second does; each device
  // shows the stage's room and the process's share.
  testing::CliRun old_sim =
      Dapple("simulate --plan " + (dir_ / "whole-plan.json").string() + " --profile " + Bert48() +
             " --cluster " + tight.string() + " --json");
  ASSERT_EQ(old_sim.code, 0) << old_sim.err;
  auto j = nlohmann::json::parse(old_sim.out);
  EXPECT_FALSE(j["fits_memory"].get<bool>());
  EXPECT_NE(old_sim.err.find("does not fit memory"), std::string::npos) << old_sim.err;
  EXPECT_DOUBLE_EQ(j["devices"][0]["memory_bytes"].get<double>(), device - process);
  EXPECT_DOUBLE_EQ(j["devices"][0]["process_memory_bytes"].get<double>(), process);
  testing::CliRun new_sim =
      Dapple("simulate --plan " + (dir_ / "tight-plan.json").string() + " --profile " + Bert48() +
             " --cluster " + tight.string() + " --json");
  ASSERT_EQ(new_sim.code, 0) << new_sim.err;
  EXPECT_TRUE(nlohmann::json::parse(new_sim.out)["fits_memory"].get<bool>());
}

TEST_F(ProcessMemoryCli, NothingLeftIsOneLineNamingTheStagesRoom) {
  fs::path none = WriteCluster("none", ClusterPreset("paper-a").device.memory_bytes - 1e6);
  testing::CliRun r = Dapple("plan --profile " + Bert48() + " --cluster " + none.string() +
                             " --global-batch 64 --no-baselines");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("memory for a stage 0.00 GB per device"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dapple
