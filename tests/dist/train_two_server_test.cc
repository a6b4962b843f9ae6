// `dapple train` as a job of several nodes (--nnodes/--node-rank/--master-addr/
// --master-port): two launchers on the loopback, and scripts/two-server.sh on the two-server
// network of scripts/netns.sh (a 2-stage plan whose boundary crosses the shaped link), both
// equal to a single process; a rank dying on one server stops the job and the namespaces
// are removed; a plan that does not need nnodes x nproc ranks is one line and exit 2.
// The namespace tests skip where namespaces are not permitted.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <sstream>

#include "dapple/runtime/launch/launcher.h"
#include "dist/netns_test_util.h"
#include "output_lines.h"
#include "train_test_util.h"

namespace dapple::testing {
namespace {

std::string TwoServerFlags(const fs::path& ckpt, int timeout_s = 30) {
  return std::string(kMlpFlags) +
         " --dtype float64 --data synthetic --seed 7 --steps 3 --optimizer sgd --lr 0.1 "
         "--momentum 0.9 --log-json --timeout-s " +
         std::to_string(timeout_s) + " --checkpoint-dir " + ckpt.string();
}

// Stage 0 (fc0..fc1) on devices 0,1 = server 0, stage 1 (fc2..head) on 2,3 = server 1.
std::string CrossingPlan() {
  return PlanJson({{"fc0", "fc1", {0, 1}}, {"fc2", "head", {2, 3}}}, 4, 2, "dapple-a");
}

// The single-process run of the same global batch (8), for comparison.
fs::path ReferenceCheckpoint(std::vector<double>* losses) {
  static fs::path ckpt;
  static std::vector<double> ref_losses;
  if (ckpt.empty()) {
    fs::path dir = TestDir("two_server_ref");
    fs::path plan = WritePlan(dir, "plan", PlanJson({{"fc0", "head", {0}}}, 8, 1, "gpipe"));
    RunResult r =
        RunDapple("train " + TwoServerFlags(dir / "ckpt") + " --plan " + plan.string(), dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    ckpt = dir / "ckpt";
    ref_losses = r.Losses();
  }
  *losses = ref_losses;
  return ckpt;
}

// Three finite losses equal to the reference's, and the parameters after 3 steps too.
void ExpectEqualsSingleProcess(const std::vector<double>& losses, const fs::path& ckpt) {
  std::vector<double> ref;
  fs::path ref_ckpt = ReferenceCheckpoint(&ref);
  ASSERT_EQ(losses.size(), 3u);
  ASSERT_EQ(ref.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::isfinite(losses[i])) << i;
    EXPECT_NEAR(losses[i], ref[i], 1e-10 * std::abs(ref[i])) << i;
  }
  EXPECT_LT(MaxRelativeDifference(ckpt / "step-3", ref_ckpt / "step-3", kMlpLayers), 1e-10);
}

std::vector<double> Losses(const std::string& out) {
  std::vector<double> l;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("loss")) l.push_back(j["loss"].get<double>());
  }
  return l;
}

TEST(TrainNodes, TwoLaunchersOnTheLoopbackEqualOneProcess) {
  fs::path dir = TestDir("two_nodes");
  fs::path plan = WritePlan(dir, "plan", CrossingPlan());
  int port = PickFreePort();
  std::string common =
      fmt::format("{} train {} --plan {} --nproc 2 --nnodes 2 --master-port {}", DAPPLE_BINARY,
                  TwoServerFlags(dir / "ckpt"), plan.string(), port);
  // Node 1 in the background, node 0 (rank 0 prints the log) in the foreground.
  CommandResult r = RunCommand(
      fmt::format("{0} --node-rank 1 > {1}/n1.log 2>&1 & {0} --node-rank 0 2>{1}/n0.err; rc=$?; "
                  "wait $! || rc=$?; cat {1}/n0.err {1}/n1.log >&2; exit $rc",
                  common, dir.string()));
  ASSERT_EQ(r.rc, 0) << r.output;
  ExpectEqualsSingleProcess(Losses(r.output), dir / "ckpt");
}

TEST(TrainNodes, PlanOfMoreDevicesThanNnodesTimesNprocIsOneLineExit2) {
  fs::path dir = TestDir("nodes_mismatch");
  fs::path plan = WritePlan(dir, "plan", CrossingPlan());  // 4 devices
  RunResult r = RunDapple("train " + TwoServerFlags(dir / "ckpt") + " --plan " + plan.string() +
                              " --nproc 1 --nnodes 2 --node-rank 0 --master-port 29500",
                          dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("the plan uses 4 devices but the job has 2 processes (--nnodes 2 x "
                       "--nproc 1)"),
            std::string::npos)
      << r.err;
}

TEST(TrainNodes, BadNodeOptionsExit2) {
  fs::path dir = TestDir("nodes_bad");
  fs::path plan = WritePlan(dir, "plan", CrossingPlan());
  std::string base = "train " + TwoServerFlags(dir / "ckpt") + " --plan " + plan.string();
  RunResult r = RunDapple(base + " --nproc 2 --nnodes 2 --node-rank 2 --master-port 29500", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--node-rank 2 must be below --nnodes 2"), std::string::npos) << r.err;
  r = RunDapple(base + " --nproc 2 --nnodes 2 --node-rank 0", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--nnodes 2 needs --master-port"), std::string::npos) << r.err;
  r = RunDapple(base + " --nnodes 2", dir);  // a launcher option without --nproc
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--nproc"), std::string::npos) << r.err;
}

class TrainTwoServerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    RunCommand(net_.Script("down"));
    fs::remove_all(net_.state_dir);
  }
  // scripts/two-server.sh train with this test's namespaces; `env` goes before the script.
  CommandResult RunTwoServer(const std::string& env, const std::string& train) {
    return RunCommand(fmt::format(
        "{} {}{}/scripts/two-server.sh --dapple {} --prefix {} --subnet {} --rate 100mbit "
        "--per-server 2 train {}",
        env, net_.Env(), DAPPLE_SOURCE_DIR, DAPPLE_BINARY, net_.prefix, net_.subnet, train));
  }
  void ExpectNamespacesGone() {
    EXPECT_FALSE(NamespaceExists(net_.Ns(0)));
    EXPECT_FALSE(NamespaceExists(net_.Ns(1)));
  }
  TestNet net_{3};
};

TEST_F(TrainTwoServerTest, HybridAcrossTheLinkEqualsOneProcess) {
  fs::path dir = TestDir("two_server");
  fs::path plan = WritePlan(dir, "plan", CrossingPlan());
  fs::path trace = dir / "trace.json";
  CommandResult r =
      RunTwoServer("", fmt::format("{} --plan {} --trace {}", TwoServerFlags(dir / "ckpt"),
                                   plan.string(), trace.string()));
  if (r.rc == 4) GTEST_SKIP() << r.output;
  ASSERT_EQ(r.rc, 0) << r.output;
  ExpectNamespacesGone();
  ExpectEqualsSingleProcess(Losses(r.output), dir / "ckpt");
  // The measured timeline (rank 0 gathers it) has a track per rank, both servers'.
  auto t = nlohmann::json::parse(Slurp(trace), nullptr, false);
  ASSERT_TRUE(t.is_object() || t.is_array()) << Slurp(trace).substr(0, 200);
  const auto& events = t.is_object() ? t["traceEvents"] : t;
  std::set<int> tracks;
  for (const auto& e : events)
    if (e.value("ph", "") == "X") tracks.insert(e.value("tid", -1));
  EXPECT_EQ(tracks, (std::set<int>{0, 1, 2, 3})) << r.output;
}

TEST_F(TrainTwoServerTest, RankDyingOnServerOneStopsTheJobAndCleansUp) {
  fs::path dir = TestDir("two_server_die");
  fs::path plan = WritePlan(dir, "plan", CrossingPlan());
  CommandResult r =
      RunTwoServer("DAPPLE_TEST_DIE_AT=3:1",
                   fmt::format("{} --plan {}", TwoServerFlags(dir / "ckpt", 5), plan.string()));
  if (r.rc == 4) GTEST_SKIP() << r.output;
  EXPECT_NE(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("rank 3 of 4 failed"), std::string::npos) << r.output;
  ExpectNamespacesGone();
}

}  // namespace
}  // namespace dapple::testing
