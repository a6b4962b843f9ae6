// The pure parts of calibration: the latency/bandwidth fit, ranks to servers, size sweeps,
// and the JSON a result writes (which must pass the cluster format's validation).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dapple/calibrate/calibration.h"
#include "dapple/calibrate/server_speeds.h"
#include "dapple/common/error.h"
#include "dapple/format/cluster.h"

namespace dapple {
namespace {

std::vector<TimingSample> Line(double latency_s, double bytes_per_s,
                               const std::vector<int64_t>& sizes) {
  std::vector<TimingSample> v;
  for (int64_t n : sizes) v.push_back({double(n), latency_s + n / bytes_per_s});
  return v;
}

TEST(FitLatencyBandwidthTest, RecoversAnExactLine) {
  LinkFit f = FitLatencyBandwidth(Line(50e-6, 125e6, SizeSweep(4, 16 << 20)), "test");
  EXPECT_NEAR(f.latency_s, 50e-6, 1e-9);
  EXPECT_NEAR(f.bandwidth_bytes_per_s, 125e6, 1e-3 * 125e6);
  EXPECT_LT(f.max_relative_error, 1e-6);
  EXPECT_EQ(f.samples.size(), SizeSweep(4, 16 << 20).size());
}

TEST(FitLatencyBandwidthTest, NoiseOnLargeMessagesKeepsTheLatency) {
  // 10% noise on the largest sample must not swamp the latency of the small ones.
  auto v = Line(20e-6, 1e9, SizeSweep(4, 4 << 20));
  v.back().seconds *= 1.10;
  LinkFit f = FitLatencyBandwidth(v, "test");
  EXPECT_NEAR(f.latency_s, 20e-6, 2e-6);
  EXPECT_GT(f.bandwidth_bytes_per_s, 0.85e9);
  EXPECT_LT(f.bandwidth_bytes_per_s, 1.0e9);
}

TEST(FitLatencyBandwidthTest, SlowSmallMessagesAndABurstDoNotMoveTheBandwidth) {
  // What a loaded machine and a token bucket do: small messages take ~1 ms whatever their
  // size, a 256 KiB message mostly fits in the bucket and goes faster than the rate.
  auto v = Line(1e-3, 120e6, SizeSweep(4, 16 << 20));
  for (auto& s : v) {
    if (s.bytes < 4096) s.seconds *= 1.5;
    if (s.bytes == 256 << 10) s.seconds = 1.3e-3;
  }
  LinkFit f = FitLatencyBandwidth(v, "test");
  EXPECT_NEAR(f.bandwidth_bytes_per_s, 120e6, 0.03 * 120e6);
  EXPECT_GT(f.latency_s, 0.9e-3);
  EXPECT_LT(f.latency_s, 1.6e-3);
}

TEST(FitLatencyBandwidthTest, ClampsNegativeLatency) {
  std::vector<TimingSample> v = {{1000, 0.5e-6}, {2000, 2e-6}, {4000, 5e-6}};
  LinkFit f = FitLatencyBandwidth(v, "test");
  EXPECT_EQ(f.latency_s, 0);
  EXPECT_GT(f.bandwidth_bytes_per_s, 0);
}

TEST(FitLatencyBandwidthTest, RejectsFlatOrTooFewSamples) {
  EXPECT_THROW(FitLatencyBandwidth({{1000, 1e-3}}, "one"), InputError);
  EXPECT_THROW(FitLatencyBandwidth({{1000, 1e-3}, {1000, 2e-3}}, "same size"), InputError);
  try {
    FitLatencyBandwidth({{4, 1e-3}, {4096, 1e-3}, {65536, 0.9e-3}}, "link x");
    FAIL() << "a time that does not grow with size has no bandwidth";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("link x"), std::string::npos) << e.what();
  }
  EXPECT_THROW(FitLatencyBandwidth({{4, 0}, {8, 1e-3}}, "zero"), InputError);
}

TEST(ServersOfRanksTest, GroupsConsecutiveRanksByHost) {
  EXPECT_EQ(ServersOfRanks({"a", "a", "b", "b"}), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(ServersOfRanks({"x", "y", "z"}), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(ServersOfRanks({"h", "h", "h"}), (std::vector<int>{0, 0, 0}));
}

TEST(ServersOfRanksTest, RejectsInterleavedHostsNamingThem) {
  try {
    ServersOfRanks({"a", "b", "a"});
    FAIL() << "interleaved hosts cannot be numbered server by server";
  } catch (const InputError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("host a"), std::string::npos) << m;
    EXPECT_NE(m.find("ranks 0 and 2"), std::string::npos) << m;
  }
  EXPECT_THROW(ServersOfRanks({"a", ""}), InputError);
}

TEST(SizeSweepTest, GrowsByFourUpToTheLimit) {
  EXPECT_EQ(SizeSweep(4, 1024), (std::vector<int64_t>{4, 16, 64, 256, 1024}));
  EXPECT_EQ(SizeSweep(4, 1000), (std::vector<int64_t>{4, 16, 64, 256}));
  EXPECT_EQ(SizeSweep(8, 8), (std::vector<int64_t>{8}));
}

TEST(CalibrationJsonTest, WritesAValidClusterWithTheMeasurementsBeside) {
  CalibrationResult r;
  r.cluster.name = "two";
  r.cluster.servers = {{2, std::nullopt}, {2, std::nullopt}};
  r.cluster.device = {4e9, 1.0};
  r.cluster.intra_server = {2e9, 10e-6};
  r.cluster.inter_server = {118e6, 60e-6};
  r.hosts = {"s0", "s0", "s1", "s1"};
  r.server_of_rank = {0, 0, 1, 1};
  r.intra_pair = {0, 1};
  r.inter_pair = {0, 2};
  r.intra = FitLatencyBandwidth(Line(10e-6, 2e9, SizeSweep(4, 1 << 20)), "intra");
  r.inter = FitLatencyBandwidth(Line(60e-6, 118e6, SizeSweep(4, 1 << 20)), "inter");
  r.allreduce = Line(100e-6, 50e6, SizeSweep(4, 1 << 20));
  std::string text = CalibrationToJsonText(r);
  Cluster back = ParseClusterJson(text, "calibrated.json");
  EXPECT_EQ(back.num_servers(), 2);
  EXPECT_EQ(back.num_devices(), 4);
  EXPECT_DOUBLE_EQ(back.inter_server.bandwidth_bytes_per_s, 118e6);
  EXPECT_DOUBLE_EQ(back.intra_server.latency_s, 10e-6);
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["format"], "dapple-cluster/1");
  EXPECT_EQ(j["calibration"]["ranks"].size(), 4u);
  EXPECT_EQ(j["calibration"]["ranks"][2]["host"], "s1");
  EXPECT_EQ(j["calibration"]["inter_server"]["ranks"], nlohmann::json({0, 2}));
  EXPECT_EQ(j["calibration"]["allreduce"]["samples"].size(), SizeSweep(4, 1 << 20).size());
  EXPECT_NE(CalibrationSummary(r).find("inter-server (ranks 0 <-> 2)"), std::string::npos);
}

TEST(FitAllReduceTest, RecoversBusBandwidthAndStepLatencyOfARing) {
  // A 4-rank ring at 100 MB/s bus bandwidth and 50 us per step: t = 6 x 50 us + 1.5 x B / bw.
  std::vector<TimingSample> v;
  for (int64_t n : SizeSweep(4, 16 << 20)) v.push_back({double(n), 6 * 50e-6 + 1.5 * n / 100e6});
  AllReduceFit f = FitAllReduce(v, 4, "ring");
  EXPECT_EQ(f.ranks, 4);
  EXPECT_NEAR(f.bus_bandwidth_bytes_per_s, 100e6, 1e-3 * 100e6);
  EXPECT_NEAR(f.step_latency_s, 50e-6, 1e-7);
  // Two ranks send as many bytes as they reduce: the bus bandwidth is the plain slope.
  std::vector<TimingSample> two;
  for (int64_t n : SizeSweep(4, 16 << 20)) two.push_back({double(n), 2 * 10e-6 + n / 1e9});
  f = FitAllReduce(two, 2, "pair");
  EXPECT_NEAR(f.bus_bandwidth_bytes_per_s, 1e9, 1e-3 * 1e9);
  EXPECT_NEAR(f.step_latency_s, 10e-6, 1e-8);
  EXPECT_THROW(FitAllReduce({{4, 1e-3}}, 2, "one sample"), InputError);
}

// Note [Per-server speeds]: each server's speed is rank 0's loop alone over the mean of its
// own ranks' loop while all run; servers within the tolerance get the job's one speed.
TEST(ServerSpeedsTest, ServersThatDifferGetTheirOwnSpeed) {
  // Server 0 (ranks 0, 1) runs the loop in 0.10 and 0.12 s, server 1 (ranks 2, 3) in 0.20 s
  // and 0.24 s; rank 0 alone took 0.1 s.
  std::vector<double> v = ServerSpeeds(0.1, {0.10, 0.12, 0.20, 0.24}, {0, 0, 1, 1});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_DOUBLE_EQ(v[0], 0.1 / 0.11);
  EXPECT_DOUBLE_EQ(v[1], 0.1 / 0.22);
}

TEST(ServerSpeedsTest, NoiseBetweenAlikeServersIsOneSpeed) {
  // 8% apart (under the 10% tolerance): every server gets 0.1 over the mean of all ranks.
  std::vector<double> v = ServerSpeeds(0.1, {0.100, 0.100, 0.108, 0.108}, {0, 0, 1, 1});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_DOUBLE_EQ(v[0], 0.1 / 0.104);
  EXPECT_DOUBLE_EQ(v[1], v[0]);
  // The same times with a tolerance of 5%: two speeds.
  v = ServerSpeeds(0.1, {0.100, 0.100, 0.108, 0.108}, {0, 0, 1, 1}, 0.05);
  EXPECT_DOUBLE_EQ(v[0], 1.0);
  EXPECT_DOUBLE_EQ(v[1], 0.1 / 0.108);
}

TEST(ServerSpeedsTest, ServersOfUnequalSizesAndOneServer) {
  std::vector<double> v = ServerSpeeds(0.2, {0.2, 0.4, 0.4, 0.4}, {0, 1, 1, 1});
  EXPECT_DOUBLE_EQ(v[0], 1.0);
  EXPECT_DOUBLE_EQ(v[1], 0.5);
  v = ServerSpeeds(0.2, {0.25, 0.15}, {0, 0});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_DOUBLE_EQ(v[0], 1.0);
}

// On one machine, ranks whose loop times are more than kUnalikeCoresRatio apart get a note
// in the summary (cores that are not alike); closer ones do not.
TEST(CalibrationSummaryTest, NamesCoresThatAreNotAlike) {
  CalibrationResult r;
  r.cluster.name = "local";
  r.cluster.servers = {{2, std::nullopt}};
  r.cluster.device = {4e9, 1.0};
  r.hosts = {"vm", "vm"};
  r.server_of_rank = {0, 0};
  r.one_machine = true;
  r.cluster.emulation = Emulation{.shared_compute = 1.6};
  ComputeSpeed k;
  k.kernel = "matmul";
  k.alone_s = 0.098;
  k.together_by_rank_s = {0.144, 0.102};
  k.together_s = 0.123;
  r.compute = k;
  std::string s = CalibrationSummary(r);
  EXPECT_NE(s.find("note: the ranks ran the loop up to 1.41x apart (rank 0 144.0 ms, rank 1 "
                   "102.0 ms): this machine's cores are not alike"),
            std::string::npos)
      << s;
  r.compute->together_by_rank_s = {0.110, 0.100};  // 1.1x: alike
  EXPECT_EQ(CalibrationSummary(r).find("not alike"), std::string::npos);
  r.compute->together_by_rank_s = {0.144, 0.102};
  r.one_machine = false;  // across machines: per-server speeds instead (ServerSpeeds)
  EXPECT_EQ(CalibrationSummary(r).find("not alike"), std::string::npos);
}

}  // namespace
}  // namespace dapple
