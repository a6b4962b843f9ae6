// `dapple calibrate` on the two-server network of scripts/netns.sh: the cluster it writes
// passes validation and reports the bandwidth tc enforces on the veth link within 10%; a
// link too slow to measure and an unreachable peer exit 2, and the namespaces are removed
// also when the run fails. Skips where namespaces are not permitted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dapple/common/json_util.h"
#include "dapple/format/cluster.h"
#include "dist/netns_test_util.h"

namespace dapple::testing {
namespace {

namespace fs = std::filesystem;

class CalibrateTwoServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("dapple-calibrate-2s-{}", getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    RunCommand(net_.Script("down"));
    fs::remove_all(dir_);
    fs::remove_all(net_.state_dir);
  }
  // scripts/calibrate-two-server.sh with this test's namespaces; `netns` and `calibrate` are
  // extra options for the script and for `dapple calibrate`.
  CommandResult RunTwoServer(const std::string& netns, const std::string& calibrate) {
    return RunCommand(fmt::format(
        "{}{}/scripts/calibrate-two-server.sh --dapple {} --prefix {} --subnet {} -o {} {} -- {}",
        net_.Env(), DAPPLE_SOURCE_DIR, DAPPLE_BINARY, net_.prefix, net_.subnet,
        (dir_ / "two.json").string(), netns, calibrate));
  }
  void ExpectNamespacesGone() {
    EXPECT_FALSE(NamespaceExists(net_.Ns(0)));
    EXPECT_FALSE(NamespaceExists(net_.Ns(1)));
  }
  TestNet net_{2};
  fs::path dir_;
};

TEST_F(CalibrateTwoServerTest, MeasuresTheBandwidthTcEnforces) {
  // 100 Mbit/s: far below what the veth pair carries unshaped even on a loaded machine, so
  // the figure is tc's and not the CPU's. tbf counts Ethernet frames: the payload a TCP
  // stream gets is 1448/1514 of the rate with a 1500-byte MTU.
  const double rate_bytes_per_s = 100e6 / 8;
  // Up to 2 MiB (0.17 s a message at this rate), 5 repeats: within 5% of the ceiling here, in
  // 18 s instead of the 35 s that 4 MiB and 10 repeats took.
  CommandResult r = RunTwoServer("--rate 100mbit --per-server 2",
                                 "--max-bytes 2MiB --repeats 5 --budget 30 --timeout 90");
  if (r.rc == 4) GTEST_SKIP() << r.output;
  ASSERT_EQ(r.rc, 0) << r.output;
  ExpectNamespacesGone();
  Cluster c = ReadClusterJson(dir_ / "two.json");  // validates
  ASSERT_EQ(c.num_servers(), 2);
  EXPECT_EQ(c.servers[0].devices, 2);
  EXPECT_EQ(c.servers[1].devices, 2);
  double bw = c.inter_server.bandwidth_bytes_per_s;
  std::printf(
      "tc rate %.3f MB/s, payload ceiling %.3f MB/s, measured %.3f MB/s (%+.1f%%), "
      "latency %.1f us; intra-server %.1f MB/s, %.1f us\n",
      rate_bytes_per_s / 1e6, rate_bytes_per_s * 1448 / 1514 / 1e6, bw / 1e6,
      (bw / rate_bytes_per_s - 1) * 100, c.inter_server.latency_s * 1e6,
      c.intra_server.bandwidth_bytes_per_s / 1e6, c.intra_server.latency_s * 1e6);
  EXPECT_NEAR(bw, rate_bytes_per_s, 0.10 * rate_bytes_per_s) << r.output;
  // Ranks of one server talk over the loopback, which tc does not shape.
  EXPECT_GT(c.intra_server.bandwidth_bytes_per_s, 3 * bw) << r.output;
  auto j = ReadJsonFile(dir_ / "two.json");
  const auto& cal = j["calibration"];
  EXPECT_EQ(cal["ranks"][0]["host"], net_.Ns(0));
  EXPECT_EQ(cal["ranks"][3]["host"], net_.Ns(1));
  EXPECT_EQ(cal["inter_server"]["ranks"], nlohmann::json({0, 2}));
  EXPECT_EQ(cal["intra_server"]["ranks"], nlohmann::json({0, 1}));
  EXPECT_GE(cal["allreduce"]["samples"].size(), 1u);
}

TEST_F(CalibrateTwoServerTest, LinkTooSlowToMeasureExitsTwoAndCleansUp) {
  // 1 Mbit/s: a 1 MiB message takes 8 s, the budget is 1 s.
  CommandResult r =
      RunTwoServer("--rate 1mbit --per-server 1",
                   "--max-bytes 1MiB --min-fit-bytes 1MiB --repeats 3 --budget 1 --timeout 20");
  if (r.rc == 4) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("too slow to measure"), std::string::npos) << r.output;
  // One line for the job: the ranks that stop because of it stay silent.
  size_t first = r.output.find("dapple: error:");
  EXPECT_NE(first, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("dapple: error:", first + 1), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "two.json"));
  ExpectNamespacesGone();
}

TEST_F(CalibrateTwoServerTest, UnreachablePeerExitsTwo) {
  // Only server 1 runs; nobody serves the rendezvous at server 0's address.
  CommandResult up = RunCommand(net_.Script("up"));
  if (up.rc == 4) GTEST_SKIP() << up.output;
  ASSERT_EQ(up.rc, 0) << up.output;
  CommandResult r = RunCommand(net_.Script(fmt::format(
      "exec s1 env DAPPLE_HOST=b GLOO_SOCKET_IFNAME={}-v1 {} calibrate -o {} --nproc 1 "
      "--nnodes 2 --node-rank 1 --master-addr {} --master-port 29500 --timeout 2 --budget 1",
      net_.prefix, DAPPLE_BINARY, (dir_ / "never.json").string(), net_.Addr(0))));
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("cannot reach the rendezvous at " + net_.Addr(0)), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "never.json"));
  EXPECT_EQ(RunCommand(net_.Script("down")).rc, 0);
  ExpectNamespacesGone();
}

}  // namespace
}  // namespace dapple::testing
