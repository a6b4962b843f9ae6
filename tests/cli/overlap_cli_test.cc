// `--no-overlap` of `dapple simulate` and `dapple plan` on the built binary: the plan's
// allreduce_overlap is overridden, the overlapped data-parallel VGG-19 is faster, the
// bucket figures are in the JSON, and a bad --bucket-mb is one line and exit code 2.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/cli_test_util.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;
using testing::Slurp;

class OverlapCli : public testing::CliTest {
 protected:
  std::string Vgg() const {
    return "--profile " + std::string(DAPPLE_DATA_DIR) +
           "/profiles/dapple/vgg-19-pbs-32.txt --cluster paper-a";
  }
};

TEST_F(OverlapCli, DataParallelVggPlanAndSimulateWithAndWithoutOverlap) {
  const fs::path on_plan = dir_ / "on.json", off_plan = dir_ / "off.json";
  testing::CliRun on =
      Dapple("plan " + Vgg() + " --global-batch 256 --planner dp --no-baselines --json -o " +
             on_plan.string());
  ASSERT_EQ(on.code, 0) << on.err;
  testing::CliRun off = Dapple(
      "plan " + Vgg() + " --global-batch 256 --planner dp --no-baselines --json --no-overlap -o " +
      off_plan.string());
  ASSERT_EQ(off.code, 0) << off.err;
  nlohmann::json pon = nlohmann::json::parse(Slurp(on_plan));
  nlohmann::json poff = nlohmann::json::parse(Slurp(off_plan));
  EXPECT_EQ(pon["allreduce_overlap"], true);
  EXPECT_EQ(poff["allreduce_overlap"], false);
  const double plan_on = nlohmann::json::parse(on.out)["iteration_ms"].get<double>();
  const double plan_off = nlohmann::json::parse(off.out)["iteration_ms"].get<double>();
  EXPECT_LT(plan_on, plan_off);

  // simulate follows the plan's field; --no-overlap overrides it.
  testing::CliRun s_on = Dapple("simulate " + Vgg() + " --json --plan " + on_plan.string());
  testing::CliRun s_off = Dapple("simulate " + Vgg() + " --json --plan " + off_plan.string());
  testing::CliRun s_forced =
      Dapple("simulate " + Vgg() + " --json --no-overlap --plan " + on_plan.string());
  ASSERT_EQ(s_on.code, 0) << s_on.err;
  ASSERT_EQ(s_off.code, 0) << s_off.err;
  ASSERT_EQ(s_forced.code, 0) << s_forced.err;
  nlohmann::json j_on = nlohmann::json::parse(s_on.out), j_off = nlohmann::json::parse(s_off.out),
                 j_forced = nlohmann::json::parse(s_forced.out);
  EXPECT_EQ(j_on["allreduce_overlap"], true);
  EXPECT_EQ(j_forced["allreduce_overlap"], false);
  EXPECT_DOUBLE_EQ(j_on["iteration_ms"].get<double>(), plan_on);
  EXPECT_DOUBLE_EQ(j_off["iteration_ms"].get<double>(), plan_off);
  EXPECT_DOUBLE_EQ(j_forced["iteration_ms"].get<double>(), plan_off);
  const nlohmann::json& st = j_on["stages"][0];
  EXPECT_GT(st["allreduce_buckets"].get<int>(), 1);
  EXPECT_LT(st["allreduce_exposed_ms"].get<double>(), st["allreduce_ms"].get<double>());
  EXPECT_EQ(j_off["stages"][0]["allreduce_buckets"], 0);
  EXPECT_DOUBLE_EQ(j_off["stages"][0]["allreduce_exposed_ms"].get<double>(),
                   j_off["stages"][0]["allreduce_ms"].get<double>());

  // Bigger buckets: fewer of them.
  testing::CliRun big =
      Dapple("simulate " + Vgg() + " --json --bucket-mb 1000 --plan " + on_plan.string());
  ASSERT_EQ(big.code, 0) << big.err;
  EXPECT_EQ(nlohmann::json::parse(big.out)["stages"][0]["allreduce_buckets"], 1);

  testing::CliRun table = Dapple("simulate " + Vgg() + " --plan " + on_plan.string());
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("buckets during the backward"), std::string::npos) << table.out;
}

TEST_F(OverlapCli, BadBucketSizeIsOneLineExitTwo) {
  const fs::path plan = dir_ / "plan.json";
  ASSERT_EQ(
      Dapple("plan " + Vgg() + " --global-batch 64 --planner dp --no-baselines -o " + plan.string())
          .code,
      0);
  testing::CliRun r = Dapple("simulate " + Vgg() + " --bucket-mb 0 --plan " + plan.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dapple: error: --bucket-mb: must be positive, got 0\n");
}

}  // namespace
}  // namespace dapple
