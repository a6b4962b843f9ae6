// `dapple plan` and `dapple simulate` on a mixed cluster: the
// table says which kinds of device each stage runs on, and a bad server device is one
// line naming the field, exit code 2.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/cli_test_util.h"
#include "dapple/format/plan.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;

class MixedClusterCli : public testing::CliTest {
 protected:
  static std::string Example() {
    return std::string(DAPPLE_SOURCE_DIR) + "/examples/clusters/mixed-8fast-8slow.json";
  }
  static std::string Vgg() {
    return std::string(DAPPLE_DATA_DIR) + "/profiles/dapple/vgg-19-pbs-32.txt";
  }
  // The example with `from` replaced by `to` in its text, written to dir_.
  std::string Edited(const std::string& from, const std::string& to) {
    std::string text = testing::Slurp(Example());
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    fs::path p = dir_ / "cluster.json";
    std::ofstream(p) << text;
    return p.string();
  }
};

using testing::Lines;

TEST_F(MixedClusterCli, BadServerDeviceIsOneLineAndExitTwo) {
  const std::string plan = "plan --profile " + Vgg() + " --global-batch 64 --cluster ";
  struct Case {
    std::string from, to, field;
  };
  for (const Case& c : {
           Case{"\"speed\": 2.0", "\"speed\": 0", "servers[0].device.speed"},
           Case{"\"speed\": 2.0", "\"speed\": -1", "servers[0].device.speed"},
           Case{"\"speed\": 2.0", "\"speed\": 2.0, \"process_memory_bytes\": 33e9",
                "servers[0].device.process_memory_bytes"},
           Case{"\"devices\": 8,\n      \"device\"", "\"devices\": 8, \"speed\": 2,\n \"device\"",
                "servers[0].speed"},
       }) {
    testing::CliRun r = Dapple(plan + Edited(c.from, c.to));
    EXPECT_EQ(r.code, 2) << c.to << "\n" << r.err;
    EXPECT_EQ(Lines(r.err), 1) << c.to << "\n" << r.err;
    EXPECT_NE(r.err.find(c.field), std::string::npos) << c.to << "\n" << r.err;
  }
}

// The example cluster (8 devices of speed 2 and 32 GB, 8 of speed 1 and 16 GB): the plan's
// table is followed by the kinds and, per stage, how many devices of each it runs on, as
// the written plan says; a cluster of one kind prints neither line.
TEST_F(MixedClusterCli, PlanSaysWhichKindsEachStageRunsOn) {
  fs::path plan = dir_ / "plan.json";
  testing::CliRun r =
      Dapple("plan --profile " + Vgg() + " --cluster " + Example() +
             " --global-batch 256 --no-baselines --refine-work 0 -o " + plan.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("device kinds: A = speed 2, 32.0 GB (devices 0-7); B = speed 1, 16.0 GB "
                       "(devices 8-15)\n"),
            std::string::npos)
      << r.out;
  Plan p = ReadPlanJson(plan);
  std::string want = "stages on kinds:";
  for (int s = 0; s < p.num_stages(); ++s) {
    int a = 0, b = 0;
    for (int d : p.stages[s].devices) (d < 8 ? a : b) += 1;
    std::string on = a > 0 ? fmt::format("A{}", a) : "";
    if (b > 0) on += fmt::format("{}B{}", on.empty() ? "" : "+", b);
    want += fmt::format("{} {} {}", s == 0 ? "" : ",", s, on);
  }
  EXPECT_NE(r.out.find(want + "\n"), std::string::npos) << want << "\n" << r.out;
  testing::CliRun uniform = Dapple("plan --profile " + Vgg() +
                                   " --cluster paper-a --global-batch 256 --no-baselines "
                                   "--refine-work 0");
  ASSERT_EQ(uniform.code, 0) << uniform.err;
  EXPECT_EQ(uniform.out.find("device kinds"), std::string::npos) << uniform.out;
}

}  // namespace
}  // namespace dapple
