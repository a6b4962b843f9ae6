// `dapple calibrate` on one machine without namespaces: `--nproc 2` makes a one-server
// cluster that passes the cluster format's validation; bad setups exit 2 with one line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dapple/calibrate/calibration.h"
#include "dapple/common/json_util.h"
#include "dapple/common/malloc_tuning.h"
#include "dapple/format/cluster.h"
#include "dapple/runtime/launch/launcher.h"
#include "dist/netns_test_util.h"
#include "output_lines.h"

namespace dapple::testing {
namespace {

namespace fs = std::filesystem;

class CalibrateLocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("dapple-calibrate-local-{}", getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  // Few repeats keep the test short; sizes up to 16 MiB make the transfer time, not the
  // scheduling delays of a loaded machine (milliseconds), decide the bandwidth.
  const std::string quick_ = "--max-bytes 16MiB --repeats 5";
};

TEST_F(CalibrateLocalTest, TwoLocalProcessesMakeAOneServerCluster) {
  fs::path out = dir_ / "local.json";
  CommandResult r = RunCommand(fmt::format("{} calibrate --nproc 2 -o {} {} --name here",
                                           DAPPLE_BINARY, out.string(), quick_));
  ASSERT_EQ(r.rc, 0) << r.output;
  Cluster c = ReadClusterJson(out);  // validates
  EXPECT_EQ(c.name, "here");
  ASSERT_EQ(c.num_servers(), 1);
  EXPECT_EQ(c.servers[0].devices, 2);
  EXPECT_NEAR(c.device.memory_bytes, PhysicalMemoryBytes() / 2, 1.0);
  // Both ranks run on this machine: each device alone is the profile's (speed 1) and they
  // share the compute measured alone / together x ranks (a range: the machine is shared
  // with other work).
  EXPECT_EQ(c.device.speed, 1.0);
  ASSERT_TRUE(c.emulation.has_value());
  EXPECT_GT(c.emulation->shared_compute, 0.1);
  EXPECT_LT(c.emulation->shared_compute, 4.0);
  ASSERT_TRUE(c.intra_server.allreduce_bandwidth_bytes_per_s.has_value())
      << "the world allreduce of one server is the intra-server allreduce";
  EXPECT_GT(*c.intra_server.allreduce_bandwidth_bytes_per_s, 1e6);
  EXPECT_GT(c.intra_server.bandwidth_bytes_per_s, 1e6) << "loopback slower than 1 MB/s?";
  auto j = ReadJsonFile(out);
  const auto& cal = j["calibration"];
  EXPECT_EQ(cal["ranks"].size(), 2u);
  EXPECT_EQ(cal["ranks"][0]["host"], cal["ranks"][1]["host"]);
  // Note [Process memory]: the larger of the two ranks' resident memory after the
  // measurements, and the freed memory a training rank lets malloc keep; a process that
  // loaded libtorch and ran gloo holds well over 64 MiB.
  EXPECT_EQ(c.device.process_memory_bytes,
            std::max(cal["ranks"][0]["resident_bytes"].get<double>(),
                     cal["ranks"][1]["resident_bytes"].get<double>()) +
                static_cast<double>(kTrainingFreedMemorySlackBytes));
  EXPECT_GT(c.device.process_memory_bytes, 64.0 * 1048576);
  EXPECT_LT(c.device.process_memory_bytes, c.device.memory_bytes);
  EXPECT_TRUE(cal["inter_server"].is_null()) << "one server has no inter-server link";
  ASSERT_TRUE(cal["intra_server"].is_object());
  EXPECT_EQ(cal["intra_server"]["ranks"], nlohmann::json({0, 1}));
  // Every size was measured (the budget is generous).
  const auto& samples = cal["intra_server"]["samples"];
  ASSERT_EQ(samples.size(), SizeSweep(4, 16 << 20).size());
  EXPECT_EQ(samples.back()["bytes"].get<double>(), 16 << 20);
  for (const auto& s : samples) EXPECT_GT(s["one_way_s"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(cal["intra_server"]["bandwidth_bytes_per_s"].get<double>(),
                   c.intra_server.bandwidth_bytes_per_s);
  EXPECT_GE(cal["allreduce"]["samples"].size(), 1u);
  EXPECT_NE(r.output.find("intra-server (ranks 0 <-> 1)"), std::string::npos) << r.output;
  ASSERT_TRUE(cal["compute"].is_object());
  EXPECT_TRUE(cal["compute"]["one_machine"].get<bool>());
  EXPECT_DOUBLE_EQ(cal["compute"]["speed"].get<double>() * 2, c.emulation->shared_compute);
  EXPECT_DOUBLE_EQ(
      cal["compute"]["alone_s"].get<double>() / cal["compute"]["together_s"].get<double>(),
      cal["compute"]["speed"].get<double>());
  // The resume cost: the token ring's chunk against the same chunk alone, in the cluster.
  ASSERT_TRUE(c.emulation.has_value());
  EXPECT_EQ(c.emulation->resume_s, cal["compute"]["resume_s"].get<double>());
  const double alone = cal["compute"]["chunk_alone_s"].get<double>();
  const double ring = cal["compute"]["chunk_ring_s"].get<double>();
  EXPECT_GT(alone, 0);
  EXPECT_GT(ring, 0);
  EXPECT_DOUBLE_EQ(c.emulation->resume_s, std::max(0.0, ring - alone));
  EXPECT_NE(r.output.find("a compute after idle time takes"), std::string::npos) << r.output;
  // Note [Stream load with two ranks]: both compute while 0 streams to 1.
  ASSERT_TRUE(c.emulation.has_value()) << r.output;
  EXPECT_GE(c.emulation->intra_server_stream_load, 0.0);
  EXPECT_LT(c.emulation->intra_server_stream_load, 8.0);
  EXPECT_EQ(c.emulation->inter_server_stream_load, c.emulation->intra_server_stream_load)
      << "one server: alike";
  EXPECT_EQ(cal["compute"]["intra_stream_load"].get<double>(),
            c.emulation->intra_server_stream_load);
  EXPECT_NE(r.output.find("a stream between two ranks takes the compute of"), std::string::npos)
      << r.output;
  // Note [Wake-up cost]: with two ranks the one-token ring is the busy ring; what a waiting
  // rank's wake-up takes beyond the link's fitted latency.
  EXPECT_EQ(cal["compute"]["busy_tokens"].get<int>(), 1);
  EXPECT_EQ(cal["compute"]["busy_delivery_s"].get<double>(),
            cal["compute"]["delivery_s"].get<double>());
  EXPECT_EQ(cal["compute"]["link_latency_s"].get<double>(), c.intra_server.latency_s);
  ASSERT_TRUE(c.emulation.has_value()) << r.output;
  EXPECT_DOUBLE_EQ(c.emulation->wake_s, std::max(0.0, cal["compute"]["delivery_s"].get<double>() -
                                                          c.intra_server.latency_s));
  EXPECT_NE(r.output.find("a rank that waits for a message wakes"), std::string::npos) << r.output;
  EXPECT_TRUE(cal["compute"]["intra_allreduce_load"].is_null()) << "nobody computes meanwhile";
}

// Three ranks: two stream while the third computes (Note [Stream load]); the measured load
// goes into both links of the one-server cluster. Two ranks cannot measure it.
TEST_F(CalibrateLocalTest, ThreeRanksMeasureTheComputeAStreamTakes) {
  fs::path out = dir_ / "three.json";
  // Up to 4 MiB: with 1 MiB the noise of a loaded machine sometimes hid the size's share of
  // the time, and calibrate refused the fit ("the time does not grow with the message size").
  CommandResult r =
      RunCommand(fmt::format("{} calibrate --nproc 3 -o {} --max-bytes 4MiB "
                             "--repeats 3 --budget 2",
                             DAPPLE_BINARY, out.string()));
  ASSERT_EQ(r.rc, 0) << r.output;
  Cluster c = ReadClusterJson(out);
  ASSERT_TRUE(c.emulation.has_value()) << r.output;
  EXPECT_GE(c.emulation->intra_server_stream_load, 0.0);
  EXPECT_LT(c.emulation->intra_server_stream_load, 8.0);
  EXPECT_EQ(c.emulation->inter_server_stream_load, c.emulation->intra_server_stream_load);
  auto j = ReadJsonFile(out);
  EXPECT_EQ(j["calibration"]["compute"]["intra_stream_load"].get<double>(),
            c.emulation->intra_server_stream_load);
  EXPECT_TRUE(j["calibration"]["compute"]["inter_stream_load"].is_null());
  EXPECT_NE(r.output.find("a stream between two ranks takes the compute of"), std::string::npos)
      << r.output;
  // Note [Wake-up cost]: a ring with 2 tokens against the link's latency, in the cluster.
  const auto& compute = j["calibration"]["compute"];
  EXPECT_EQ(compute["busy_tokens"].get<int>(), 2);
  EXPECT_GT(compute["delivery_s"].get<double>(), 0);
  EXPECT_GT(compute["busy_delivery_s"].get<double>(), 0);
  ASSERT_TRUE(c.emulation.has_value()) << r.output;
  EXPECT_DOUBLE_EQ(c.emulation->wake_s, std::max(0.0, compute["busy_delivery_s"].get<double>() -
                                                          c.intra_server.latency_s));
  EXPECT_LT(c.emulation->wake_s, 1.0);
  EXPECT_NE(r.output.find("a rank that waits for a message wakes"), std::string::npos) << r.output;
  // Note [Allreduce load]: ranks 0 and 1 allreduce while rank 2 computes; record only.
  const auto& load = compute["intra_allreduce_load"];
  ASSERT_TRUE(load.is_object()) << compute.dump();
  EXPECT_EQ(load["ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(load["computing"].get<int>(), 1);
  EXPECT_EQ(load["bytes"].get<double>(), 4 << 20);
  EXPECT_GT(load["alone_s"].get<double>(), 0);
  EXPECT_GT(load["loaded_s"].get<double>(), 0);
  EXPECT_GT(load["compute_stretch"].get<double>(), 0);
  EXPECT_GE(load["load_per_rank"].get<double>(), 0);
  EXPECT_NE(r.output.find("an allreduce of 4 MiB between ranks 0 and 1 took"), std::string::npos)
      << r.output;
}

// --cold-caches: the resume cost's chunk alone is timed from cold caches (Note [Resume cost]).
TEST_F(CalibrateLocalTest, ColdCachesTimeTheChunkAloneCold) {
  fs::path out = dir_ / "cold.json";
  CommandResult r = RunCommand(fmt::format("{} calibrate --nproc 2 -o {} {} --cold-caches",
                                           DAPPLE_BINARY, out.string(), quick_));
  ASSERT_EQ(r.rc, 0) << r.output;
  Cluster c = ReadClusterJson(out);
  const auto compute = ReadJsonFile(out)["calibration"]["compute"];
  EXPECT_TRUE(compute["cold_caches"].get<bool>());
  const double alone = compute["chunk_alone_s"].get<double>();
  EXPECT_GT(alone, 0);
  // Timed, not derived from the warm loop's mean per iteration.
  EXPECT_NE(alone, compute["alone_s"].get<double>() / compute["iterations"].get<int>() *
                       compute["chunk_iterations"].get<int>());
  ASSERT_TRUE(c.emulation.has_value());
  EXPECT_DOUBLE_EQ(c.emulation->resume_s,
                   std::max(0.0, compute["chunk_ring_s"].get<double>() - alone));
}

TEST_F(CalibrateLocalTest, GivenSpeedIsKeptAndNotMeasured) {
  fs::path out = dir_ / "given.json";
  CommandResult r = RunCommand(fmt::format("{} calibrate --nproc 2 -o {} {} --speed 0.75",
                                           DAPPLE_BINARY, out.string(), quick_));
  ASSERT_EQ(r.rc, 0) << r.output;
  Cluster c = ReadClusterJson(out);
  EXPECT_EQ(c.device.speed, 0.75);
  EXPECT_FALSE(c.emulation.has_value());
  auto j = ReadJsonFile(out);
  EXPECT_FALSE(j["calibration"].contains("compute"));
}

TEST_F(CalibrateLocalTest, HostOverrideMakesTwoServersOnOneMachine) {
  // DAPPLE_HOST groups ranks into servers: two launchers of one process each, as two nodes.
  fs::path out = dir_ / "two.json";
  int port = PickFreePort();
  std::string common = fmt::format("calibrate -o {} {} --nnodes 2 --master-port {} --nproc 1",
                                   out.string(), quick_, port);
  CommandResult r = RunCommand(fmt::format(
      "DAPPLE_HOST=a {0} {1} --node-rank 0 > {2}/a.log 2>&1 & "
      "DAPPLE_HOST=b {0} {1} --node-rank 1; rc=$?; wait $! || rc=$?; cat {2}/a.log; exit $rc",
      DAPPLE_BINARY, common, dir_.string()));
  ASSERT_EQ(r.rc, 0) << r.output;
  Cluster c = ReadClusterJson(out);
  ASSERT_EQ(c.num_servers(), 2);
  EXPECT_EQ(c.servers[0].devices, 1);
  EXPECT_EQ(c.servers[1].devices, 1);
  auto j = ReadJsonFile(out);
  EXPECT_TRUE(j["calibration"]["intra_server"].is_null());
  EXPECT_EQ(j["calibration"]["inter_server"]["ranks"], nlohmann::json({0, 1}));
  EXPECT_EQ(j["calibration"]["ranks"][1]["host"], "b");
}

TEST_F(CalibrateLocalTest, UnreachablePeerExitsTwoWithOneLine) {
  fs::path out = dir_ / "never.json";
  int port = PickFreePort();  // nobody listens there
  CommandResult r = RunCommand(
      fmt::format("RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={} {} calibrate -o {} "
                  "--timeout 2 --budget 1",
                  port, DAPPLE_BINARY, out.string()));
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_EQ(Lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find(fmt::format("127.0.0.1:{}", port)), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out));
}

// (Plain `dapple calibrate` starts one process per device of `local`.)
TEST_F(CalibrateLocalTest, OneProcessIsNotEnough) {
  fs::path out = dir_ / "one.json";
  CommandResult r = RunCommand(fmt::format("env -u WORLD_SIZE -u RANK {} calibrate --nproc 1 -o {}",
                                           DAPPLE_BINARY, out.string()));
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("at least two processes"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(CalibrateLocalTest, TimeoutMustCoverTheBudget) {
  fs::path out = dir_ / "t.json";
  CommandResult r = RunCommand(fmt::format("{} calibrate --nproc 2 -o {} --budget 5 --timeout 6",
                                           DAPPLE_BINARY, out.string()));
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("--timeout"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace dapple::testing
