// `dapple calibrate` and the cached `local` cluster: a calibration of this machine replaces
// another machine's cache, and plain `dapple calibrate` reuses a current one without
// measuring.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "dapple/common/machine.h"
#include "dapple/format/local_cluster.h"
#include "dist/netns_test_util.h"

namespace dapple::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CalibrateCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("dapple-calibrate-cache-{}", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    env_ = "DAPPLE_CACHE_DIR=" + dir_.string() + " ";
    path_ = dir_ / "local-cluster.json";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A made-up calibration of `machine` with `devices` devices.
  void WriteCache(const MachineIdentity& machine, int devices) {
    Cluster c = ClusterPreset("local");
    c.servers = {ServerSpec{devices, std::nullopt}};
    c.emulation = Emulation{.shared_compute = 0.5};
    c.local = LocalDevices{machine, ThreadsPerProcess(machine.cores, devices), false,
                           kCalibrationVersion, std::nullopt};
    WriteLocalCalibration(c, path_);
  }

  fs::path dir_, path_;
  std::string env_;
};

TEST_F(CalibrateCacheTest, AnotherMachinesCacheIsReplacedByThisOnes) {
  MachineIdentity other = ThisMachine();
  other.hostname += "-elsewhere";
  WriteCache(other, 2);
  ASSERT_FALSE(LoadLocalCluster(path_, ThisMachine()).calibrated);
  CommandResult r = RunCommand(
      fmt::format("{}{} calibrate --nproc 2 --max-bytes 1MiB --repeats 3 --budget 2 --timeout 30",
                  env_, DAPPLE_BINARY));
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cached as this machine's `local` cluster: " + path_.string()));
  LocalCluster l = LoadLocalCluster(path_, ThisMachine());
  ASSERT_TRUE(l.calibrated) << l.note;
  EXPECT_EQ(l.cluster.num_devices(), 2);
  ASSERT_TRUE(l.cluster.emulation.has_value()) << "measured on one machine";
  EXPECT_NE(l.cluster.emulation->shared_compute, 0.5);
  EXPECT_EQ(l.cluster.local->threads_per_device, ThreadsPerProcess(ThisMachine().cores, 2));
  EXPECT_EQ(l.cluster.local->cold_caches, false);
  EXPECT_EQ(l.cluster.local->calibration_version, kCalibrationVersion);
  EXPECT_TRUE(l.cluster.local->busy_cores.has_value()) << "the cores busy when it began";
}

TEST_F(CalibrateCacheTest, PlainCalibrateReusesACurrentCache) {
  const int devices = std::max(2, ThisMachine().cores);
  WriteCache(ThisMachine(), devices);
  auto before = fs::last_write_time(path_);
  CommandResult r = RunCommand(fmt::format("{}{} calibrate", env_, DAPPLE_BINARY));
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("this machine's calibration is current"));
  EXPECT_THAT(r.output, HasSubstr("--force"));
  EXPECT_EQ(fs::last_write_time(path_), before) << "not measured again";
  EXPECT_EQ(LoadLocalCluster(path_, ThisMachine()).cluster.emulation->shared_compute, 0.5);
}

}  // namespace
}  // namespace dapple::testing
