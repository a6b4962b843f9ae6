// `dapple train` fails cleanly: a process killed mid-iteration stops the job within the
// timeout with the failed rank named and the others naming what they waited on; bad input
// (plan vs model, plan vs world size, unreachable rendezvous) is one line and exit code 2.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>

#include "dapple/runtime/comm/device.h"
#include "output_lines.h"
#include "train_test_util.h"

namespace dapple::testing {
namespace {

std::string Base() {
  return std::string("train ") + kMlpFlags + " --dtype float64 --data synthetic --steps 3";
}

fs::path TwoStagePlan(const fs::path& dir) {
  return WritePlan(dir, "plan",
                   PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1, 2}}}, 4, 4, "dapple-a"));
}

// The seconds in every "failed or timed out after X s" / "failed after X s" of `err`: how
// long the failing chain of waits waited (Note [One deadline per wait chain]).
std::vector<double> ReportedWaits(const std::string& err) {
  std::vector<double> out;
  static const std::regex re(R"(failed(?: or timed out)? after ([0-9.]+) s)");
  for (std::sregex_iterator it(err.begin(), err.end(), re), end; it != end; ++it)
    out.push_back(std::stod((*it)[1]));
  return out;
}

TEST(TrainFailure, KilledProcessStopsTheJobWithinTheTimeout) {
  fs::path dir = TestDir("die");
  auto t0 = std::chrono::steady_clock::now();
  RunResult r = RunDapple(Base() + " --timeout-s 4 --nproc 3 --plan " + TwoStagePlan(dir).string(),
                          dir, "DAPPLE_TEST_DIE_AT=1:1");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("rank 1 of 3 failed"), std::string::npos) << r.err;
  // The survivors name rank, stage, micro-batch and instruction they waited on.
  EXPECT_NE(r.err.find("micro-batch"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(stage "), std::string::npos) << r.err;
  // Timeout 4 s, plus launching and the launcher's grace: far below a hang.
  EXPECT_LT(secs, 25) << r.err;
  // Each survivor reported within one timeout (plus 2 s) of the wait that saw it.
  for (double w : ReportedWaits(r.err)) EXPECT_LE(w, 4 + 2) << r.err;
  fs::remove_all(dir);
}

TEST(TrainFailure, RankMissingFromTheSummaryGatherIsReportedWithinOneTimeout) {
  // Rank 2 dies after the last step, before the summary: rank 0 waits for its report, and
  // gives up after one --timeout-s for the whole gather, naming what it gathered.
  fs::path dir = TestDir("gather");
  RunResult r = RunDapple(Base() + " --timeout-s 3 --nproc 3 --plan " + TwoStagePlan(dir).string(),
                          dir, "DAPPLE_TEST_DIE_AT=2:3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("rank 2 of 3 failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 0: gathering summary failed"), std::string::npos) << r.err;
  std::vector<double> waits = ReportedWaits(r.err);
  ASSERT_FALSE(waits.empty()) << r.err;
  for (double w : waits) {
    EXPECT_GE(w, 3 - 0.1) << r.err;  // it did wait for the timeout: rank 2 was silent
    EXPECT_LE(w, 3 + 2) << r.err;    // and for one timeout, not one per rank
  }
  fs::remove_all(dir);
}

TEST(TrainFailure, WorldSizeMismatchIsOneLineExit2) {
  fs::path dir = TestDir("world");
  RunResult r = RunDapple(Base() + " --nproc 2 --plan " + TwoStagePlan(dir).string(), dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("uses 3 devices but the job has 2 processes"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(TrainFailure, PlanLayersNotTheModelsIsOneLineExit2) {
  fs::path dir = TestDir("layers");
  fs::path plan = WritePlan(
      dir, "plan", PlanJson({{"fc0", "fc1", {0}}, {"block2", "head", {1}}}, 2, 2, "gpipe"));
  RunResult r = RunDapple(Base() + " --nproc 2 --plan " + plan.string(), dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("'block2' is not a layer of model mlp"), std::string::npos) << r.err;

  // A plan for a model with more layers (by index): names the counts.
  nlohmann::json j = nlohmann::json::parse(PlanJson({{"", "", {0}}}, 2, 2, "gpipe"));
  j["stages"][0] = {{"first_layer", 0}, {"last_layer", 6}, {"devices", {0}}};
  plan = WritePlan(dir, "plan7", j.dump());
  r = RunDapple(Base() + " --plan " + plan.string(), dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  fs::remove_all(dir);
}

TEST(TrainFailure, PlanWithTooManyMessageTagsIsOneLineExit2) {
  // 2 stages x 1025 micro-batches on 1024 processes: 2 x 1025 x 1024^2 tags > 2^31. Refused
  // when the plan is loaded, before any process starts.
  fs::path dir = TestDir("tags");
  fs::path plan = WritePlan(
      dir, "plan", PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 1, 1025, "dapple-a"));
  RunResult r = RunDapple(Base() + " --nproc 1024 --plan " + plan.string(), dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("num_micro_batches"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("message tags"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(TrainFailure, CudaDeviceWithoutAGpuIsRefusedAtStart) {
  // --device cuda on a machine without a GPU: refused before any process starts (launcher)
  // or trains (a rank). Skipped where there is a GPU.
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a GPU";
  fs::path dir = TestDir("cuda");
  for (const std::string launch : {" --nproc 3", ""}) {
    std::string env;
    if (launch.empty()) env = "WORLD_SIZE=3 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=1";
    RunResult r = RunDapple(Base() + launch + " --device cuda --plan " + TwoStagePlan(dir).string(),
                            dir, env);
    EXPECT_EQ(r.exit_code, 2) << launch;
    EXPECT_EQ(Lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("--device cuda: LOCAL_RANK"), std::string::npos) << r.err;
  }
  fs::remove_all(dir);
}

TEST(TrainFailure, UnreachableRendezvousIsOneLineExit2) {
  fs::path dir = TestDir("rdzv");
  // Rank 1 of 2 whose rank 0 never comes: nobody serves the store.
  RunResult r = RunDapple(Base() + " --timeout-s 2 --plan " + TwoStagePlan(dir).string(), dir,
                          "WORLD_SIZE=3 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("cannot reach the rendezvous"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dapple::testing
