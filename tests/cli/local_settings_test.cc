// `plan` and `simulate` with `--cluster local`: one line when `local` is the guess (no
// current calibration of this machine), none when the cached calibration is used, and one
// warning line when the profile was measured unlike the cluster's devices compute.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/cli_test_util.h"
#include "dapple/common/machine.h"
#include "dapple/format/local_cluster.h"
#include "dapple/format/profile.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

using testing::Lines;

class LocalSettingsCli : public testing::CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    const char* old = std::getenv("DAPPLE_CACHE_DIR");
    saved_ = old ? std::optional<std::string>(old) : std::nullopt;
    setenv("DAPPLE_CACHE_DIR", (dir_ / "cache").c_str(), 1);
  }
  void TearDown() override {
    if (saved_)
      setenv("DAPPLE_CACHE_DIR", saved_->c_str(), 1);
    else
      unsetenv("DAPPLE_CACHE_DIR");
    CliTest::TearDown();
  }

  // A 4-layer profile measured on this machine with `threads` threads.
  std::string WriteProfile(int threads, bool cold) {
    Profile p;
    p.model = "toy";
    p.batch_size = 8;
    for (int i = 0; i < 4; ++i) {
      LayerProfile l;
      l.id = l.name = "l" + std::to_string(i);
      l.forward_ms = 1.0;
      l.backward_ms = 2.0;
      l.activation_bytes = 4096;
      l.parameter_bytes = 65536;
      p.layers.push_back(l);
    }
    p.settings = ProfileSettings{threads, {8}, "sgd", cold, ThisMachine()};
    fs::path path = dir_ / ("profile-" + std::to_string(threads) + ".json");
    WriteProfileJson(p, path);
    return path.string();
  }

  // This machine's calibration in the cache: 2 devices, cold caches, taken while other work
  // kept `busy_cores` cores busy (unset: not recorded).
  void WriteCalibration(std::optional<double> busy_cores = std::nullopt) {
    Cluster c = ClusterPreset("local");
    c.servers = {ServerSpec{2, std::nullopt}};
    c.emulation = Emulation{.shared_compute = 1.5};
    c.local = LocalDevices{ThisMachine(), ThreadsPerProcess(ThisMachine().cores, 2), true,
                           kCalibrationVersion, busy_cores};
    WriteLocalCalibration(c, LocalCalibrationPath());
  }

  testing::CliRun Plan(const std::string& profile) {
    return Dapple("plan --profile " + profile +
                  " --cluster local --global-batch 16 --no-baselines -o " +
                  (dir_ / "plan.json").string());
  }

  std::optional<std::string> saved_;
};

TEST_F(LocalSettingsCli, TheGuessIsNamedInOneLine) {
  testing::CliRun r = Plan(WriteProfile(1, false));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("dapple: note: cluster 'local' is the guess"));
  EXPECT_THAT(r.err, HasSubstr("dapple calibrate"));
  testing::CliRun s = Dapple("simulate --profile " + WriteProfile(1, false) +
                             " --cluster local --plan " + (dir_ / "plan.json").string());
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(Lines(s.err), 1) << s.err;
  EXPECT_THAT(s.err, HasSubstr("is the guess"));
}

TEST_F(LocalSettingsCli, ThreadsUnlikeTheDevicesWarnOnce) {
  // The guess gives each of the `cores` devices one thread.
  testing::CliRun r = Plan(WriteProfile(64, false));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Lines(r.err), 2) << r.err;  // the guess, the warning
  EXPECT_THAT(r.err, HasSubstr("dapple: warning: the profile (toy) was not measured as the "
                               "devices of cluster 'local' compute: 64 threads against 1 per "
                               "device"));
  testing::CliRun s = Dapple("simulate --profile " + WriteProfile(64, false) +
                             " --cluster local --plan " + (dir_ / "plan.json").string());
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_THAT(s.err, HasSubstr("64 threads against 1 per device"));
}

TEST_F(LocalSettingsCli, TheCalibrationIsUsedSilentlyAndItsCachesCompared) {
  WriteCalibration();
  const int threads = ThreadsPerProcess(ThisMachine().cores, 2);
  testing::CliRun r = Plan(WriteProfile(threads, true));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "calibrated, measured alike: nothing to say";
  EXPECT_THAT(r.out, HasSubstr("on local (1 servers, 2 devices)"));
  r = Plan(WriteProfile(threads, false));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("warm caches against a calibration with cold caches"));
  EXPECT_THAT(r.err, Not(HasSubstr("guess")));
}

// A calibration taken while other work kept the cores busy is used, with one line saying so.
TEST_F(LocalSettingsCli, ABusyCalibrationIsUsedAndNamed) {
  WriteCalibration(static_cast<double>(ThisMachine().cores));
  testing::CliRun r = Plan(WriteProfile(ThreadsPerProcess(ThisMachine().cores, 2), true));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("dapple: note: cluster 'local': this machine's calibration"));
  EXPECT_THAT(r.err, HasSubstr("taken while other work kept"));
  EXPECT_THAT(r.out, HasSubstr("on local (1 servers, 2 devices)")) << "the calibration, used";
}

}  // namespace
}  // namespace dapple
