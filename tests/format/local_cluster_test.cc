// The cached calibration of this machine behind `--cluster local`: used while the machine's
// identity matches, the guess (with the reason) otherwise.
#include "dapple/format/local_cluster.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "dapple/common/machine.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class LocalClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dapple_local_cluster_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    path_ = dir_ / "cache" / "local-cluster.json";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A calibration of `machine` unlike the guess: 2 devices, measured links, shared compute.
  static Cluster Calibrated(const MachineIdentity& machine) {
    Cluster c = ClusterPreset("local");
    c.name = "calibrated";
    c.servers = {ServerSpec{2, std::nullopt}};
    c.intra_server = LinkSpec{1.25e9, 31e-6};
    c.inter_server = c.intra_server;
    c.emulation = Emulation{.shared_compute = 1.6};
    c.local = LocalDevices{machine, ThreadsPerProcess(machine.cores, 2), true, kCalibrationVersion,
                           std::nullopt};
    return c;
  }

  fs::path dir_, path_;
};

TEST_F(LocalClusterTest, NoCacheIsTheGuessAndSaysHowToMeasure) {
  LocalCluster l = LoadLocalCluster(path_, ThisMachine());
  EXPECT_FALSE(l.calibrated);
  EXPECT_EQ(l.cluster.num_devices(), ThisMachine().cores);
  EXPECT_FALSE(l.cluster.emulation.has_value());
  EXPECT_THAT(l.note, HasSubstr("is the guess"));
  EXPECT_THAT(l.note, HasSubstr(path_.string()));
  EXPECT_THAT(l.note, HasSubstr("dapple calibrate"));
}

TEST_F(LocalClusterTest, CalibrationOfThisMachineIsReused) {
  WriteLocalCalibration(Calibrated(ThisMachine()), path_);
  for (int k = 0; k < 2; ++k) {  // read again: the same
    LocalCluster l = LoadLocalCluster(path_, ThisMachine());
    ASSERT_TRUE(l.calibrated) << l.note;
    EXPECT_EQ(l.cluster.name, "local");
    EXPECT_EQ(l.cluster.num_devices(), 2);
    EXPECT_EQ(l.cluster.intra_server.bandwidth_bytes_per_s, 1.25e9);
    ASSERT_TRUE(l.cluster.emulation.has_value());
    EXPECT_EQ(l.cluster.emulation->shared_compute, 1.6);
    ASSERT_TRUE(l.cluster.local.has_value());
    EXPECT_EQ(l.cluster.local->cold_caches, true);
    EXPECT_EQ(l.cluster.local->threads_per_device, ThreadsPerProcess(ThisMachine().cores, 2));
  }
}

TEST_F(LocalClusterTest, AnotherMachinesCalibrationFallsBackNamingTheDifference) {
  MachineIdentity other = ThisMachine();
  other.cores += 2;
  WriteLocalCalibration(Calibrated(other), path_);
  LocalCluster l = LoadLocalCluster(path_, ThisMachine());
  EXPECT_FALSE(l.calibrated);
  EXPECT_EQ(l.cluster.num_devices(), ThisMachine().cores) << "the guess";
  EXPECT_THAT(l.note, HasSubstr("another machine"));
  EXPECT_THAT(l.note, HasSubstr(fmt::format("cores {} -> {}", other.cores, ThisMachine().cores)));
  // A new calibration of this machine replaces it and is used.
  WriteLocalCalibration(Calibrated(ThisMachine()), path_);
  EXPECT_TRUE(LoadLocalCluster(path_, ThisMachine()).calibrated);
  // So does a changed host name or machine id.
  MachineIdentity moved = ThisMachine();
  moved.hostname += "-renamed";
  EXPECT_THAT(LoadLocalCluster(path_, moved).note, HasSubstr("host"));
  moved = ThisMachine();
  moved.machine_id = "0123";
  EXPECT_FALSE(LoadLocalCluster(path_, moved).calibrated);
}

TEST_F(LocalClusterTest, UnreadableOrAnonymousCacheFallsBack) {
  fs::create_directories(path_.parent_path());
  std::ofstream(path_) << "{ not json";
  LocalCluster l = LoadLocalCluster(path_, ThisMachine());
  EXPECT_FALSE(l.calibrated);
  EXPECT_THAT(l.note, HasSubstr("unreadable"));
  Cluster anonymous = Calibrated(ThisMachine());
  anonymous.local.reset();
  std::ofstream(path_) << ClusterToJsonText(anonymous);
  l = LoadLocalCluster(path_, ThisMachine());
  EXPECT_FALSE(l.calibrated);
  EXPECT_THAT(l.note, HasSubstr("does not name the machine"));
}

// Note [Calibration version]: a cache an older dapple wrote (no version, or a lower one) is
// not used; the version written now is.
TEST_F(LocalClusterTest, AnOlderDapplesCalibrationIsTheGuess) {
  WriteLocalCalibration(Calibrated(ThisMachine()), path_);
  LocalCluster now = LoadLocalCluster(path_, ThisMachine());
  ASSERT_TRUE(now.calibrated) << now.note;
  EXPECT_EQ(now.cluster.local->calibration_version, kCalibrationVersion);
  // The file as versions before 1 wrote it: no `calibration_version`.
  nlohmann::json j = nlohmann::json::parse(ClusterToJsonText(Calibrated(ThisMachine())));
  ASSERT_TRUE(j["local"].contains("calibration_version"));
  j["local"].erase("calibration_version");
  std::ofstream(path_) << j.dump(2);
  LocalCluster old = LoadLocalCluster(path_, ThisMachine());
  EXPECT_FALSE(old.calibrated);
  EXPECT_EQ(old.cluster.num_devices(), ThisMachine().cores) << "the guess";
  EXPECT_THAT(old.note, HasSubstr("older dapple"));
  EXPECT_THAT(old.note, HasSubstr("calibration version 0"));
  EXPECT_THAT(ReasonToCalibrateAgain(old, 2, 0.0, 2).value_or(""), HasSubstr("older dapple"));
  Cluster lower = Calibrated(ThisMachine());
  lower.local->calibration_version = kCalibrationVersion - 1;
  WriteLocalCalibration(lower, path_);
  EXPECT_FALSE(LoadLocalCluster(path_, ThisMachine()).calibrated);
}

// A calibration taken on a busy machine is used and says so; plain `dapple calibrate` keeps it
// while the machine stays busy and measures again once it is idle.
TEST_F(LocalClusterTest, ABusyCalibrationIsUsedUntilTheMachineIsIdle) {
  EXPECT_TRUE(MachineIsBusy(1.0, 2));
  EXPECT_FALSE(MachineIsBusy(0.9, 2));
  EXPECT_FALSE(MachineIsBusy(3.0, 8));
  MachineIdentity m = ThisMachine();
  Cluster busy = Calibrated(m);
  busy.local->busy_cores = 0.5 * m.cores + 1.0;
  WriteLocalCalibration(busy, path_);
  LocalCluster l = LoadLocalCluster(path_, m);
  ASSERT_TRUE(l.calibrated) << l.note;
  EXPECT_TRUE(l.busy);
  EXPECT_EQ(l.cluster.local->busy_cores, 0.5 * m.cores + 1.0);
  EXPECT_THAT(l.note, HasSubstr("busy"));
  EXPECT_EQ(ReasonToCalibrateAgain(l, 2, 0.5 * m.cores + 1.0, m.cores), std::nullopt)
      << "still busy: keep it";
  EXPECT_EQ(ReasonToCalibrateAgain(l, 2, std::nullopt, m.cores), std::nullopt)
      << "no load figure: keep it";
  EXPECT_THAT(ReasonToCalibrateAgain(l, 2, 0.0, m.cores).value_or(""), HasSubstr("idle now"));
  EXPECT_THAT(ReasonToCalibrateAgain(l, 3, 0.5 * m.cores + 1.0, m.cores).value_or(""),
              HasSubstr("2 devices, not 3"));

  Cluster quiet = Calibrated(m);
  quiet.local->busy_cores = 0.0;
  WriteLocalCalibration(quiet, path_);
  l = LoadLocalCluster(path_, m);
  ASSERT_TRUE(l.calibrated);
  EXPECT_FALSE(l.busy);
  EXPECT_THAT(l.note, ::testing::Not(HasSubstr("busy")));
  EXPECT_EQ(ReasonToCalibrateAgain(l, 2, 0.0, m.cores), std::nullopt);
}

TEST_F(LocalClusterTest, LoadClusterLocalReadsTheCacheOfDappleCacheDir) {
  const char* old = std::getenv("DAPPLE_CACHE_DIR");
  std::string saved = old ? old : "";
  setenv("DAPPLE_CACHE_DIR", path_.parent_path().c_str(), 1);
  EXPECT_EQ(LocalCalibrationPath(), path_);
  EXPECT_EQ(LoadCluster("local").num_devices(), ThisMachine().cores);
  WriteLocalCalibration(Calibrated(ThisMachine()), LocalCalibrationPath());
  EXPECT_EQ(LoadCluster("local").num_devices(), 2);
  EXPECT_EQ(LoadCluster("local").emulation.value_or(Emulation{}).shared_compute, 1.6);
  if (old)
    setenv("DAPPLE_CACHE_DIR", saved.c_str(), 1);
  else
    unsetenv("DAPPLE_CACHE_DIR");
}

TEST(MachineIdentity, DifferencesAreNamedAndMemoryJitterIsNot) {
  MachineIdentity a = ThisMachine(), b = a;
  EXPECT_FALSE(a.DifferenceTo(b).has_value());
  b.memory_bytes *= 1.001;
  EXPECT_FALSE(a.DifferenceTo(b).has_value()) << "a few MB between boots";
  b.memory_bytes = a.memory_bytes * 2 + 1e9;
  EXPECT_THAT(a.DifferenceTo(b).value_or(""), HasSubstr("memory"));
  b = a;
  b.cpu = "Another CPU";
  EXPECT_THAT(a.DifferenceTo(b).value_or(""), HasSubstr("Another CPU"));
}

TEST(MachineIdentity, ThreadsPerProcessSplitTheCores) {
  EXPECT_EQ(ThreadsPerProcess(16, 4), 4);
  EXPECT_EQ(ThreadsPerProcess(2, 2), 1);
  EXPECT_EQ(ThreadsPerProcess(2, 3), 1);
  EXPECT_EQ(ThreadsPerProcess(7, 2), 3);
}

}  // namespace
}  // namespace dapple
