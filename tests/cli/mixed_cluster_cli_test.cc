// `dapple plan` and `dapple simulate` on a mixed cluster (issue 15, mixed devices): the
// table says which kinds of device each stage runs on, and a bad server device is one
// line naming the field, exit code 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/cli_test_util.h"

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

int Lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

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

}  // namespace
}  // namespace dapple
