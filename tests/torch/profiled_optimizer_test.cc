// `dapple train` says in one line when the plan's profile timed another optimizer's update
// than the run trains with (the plan records its profile, and the profile its settings).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli/cli_test_util.h"

namespace dapple {
namespace {

class ProfiledOptimizer : public testing::CliTest {};

TEST_F(ProfiledOptimizer, TrainingWithAnotherOptimizerIsOneWarningLine) {
  const std::string model = " --model mlp --opt hidden=16 --opt layers=2";
  const std::string profile = (dir_ / "profile.json").string();
  const std::string plan = (dir_ / "plan.json").string();
  const std::string cluster = (dir_ / "one.json").string();
  testing::CliRun p = Dapple("profile" + model + " --batch 4 --batches 4 --warmup 0 --repeat 1 " +
                             "--optimizer sgd -o " + profile);
  ASSERT_EQ(p.code, 0) << p.err;
  std::ofstream(cluster) << R"({"format": "dapple-cluster/1", "name": "one",
    "servers": [{"devices": 1}], "device": {"memory_bytes": 1e9},
    "intra_server": {"bandwidth_bytes_per_s": 1e9}})";
  testing::CliRun pl = Dapple("plan --profile " + profile + " --cluster " + cluster +
                              " --global-batch 8 --no-baselines -o " + plan);
  ASSERT_EQ(pl.code, 0) << pl.err;
  const std::string train = "train" + model + " --plan " + plan + " --nproc 1 --steps 1 --quiet";
  testing::CliRun adam = Dapple(train + " --optimizer adam");
  ASSERT_EQ(adam.code, 0) << adam.err;
  EXPECT_NE(adam.err.find("dapple train: warning: the plan was made from " + profile +
                          ", which timed the sgd update; this run trains with adam"),
            std::string::npos)
      << adam.err;
  testing::CliRun sgd = Dapple(train + " --optimizer sgd");
  ASSERT_EQ(sgd.code, 0) << sgd.err;
  EXPECT_EQ(sgd.err.find("warning"), std::string::npos) << sgd.err;
}

}  // namespace
}  // namespace dapple
