// `dapple train --max-restarts N` (Note [Restarts] in runtime/launch/restarts.h): after a
// rank dies the launcher starts every rank again; they resume from the newest checkpoint and
// the run ends bit-identical to one without the failure (same plan).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "train_test_util.h"

namespace dapple::testing {
namespace {

// The command of every run here; no --checkpoint-dir when `ckpt` is empty.
std::string RestartFlags(const fs::path& ckpt, const fs::path& plan) {
  return std::string("train ") + kMlpFlags +
         " --dtype float64 --data synthetic --seed 3 --optimizer adam --lr 0.05 --log-json "
         "--timeout-s 30 --steps 6 --nproc 2 --plan " +
         plan.string() + (ckpt.empty() ? "" : " --checkpoint-dir " + ckpt.string());
}

class TrainRestart : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir("restart");
    plan_ = WritePlan(dir_, "a",
                      PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 2, 4, "dapple-a"));
    full_ = RunDapple(RestartFlags(dir_ / "full", plan_), dir_);
    ASSERT_EQ(full_.exit_code, 0) << full_.err;
    ASSERT_EQ(full_.Losses().size(), 6u);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The losses after the restart line are the uninterrupted run's from `from` on, bit for
  // bit, and the final weights are equal.
  void ExpectSameAsUninterrupted(const RunResult& r, const fs::path& ckpt, size_t from) {
    auto want = full_.Losses(), got = r.Losses();
    ASSERT_GE(got.size(), 6 - from) << r.out;
    for (size_t i = 0; i < 6 - from; ++i)
      EXPECT_EQ(got[got.size() - (6 - from) + i], want[from + i]) << "step " << from + i + 1;
    EXPECT_EQ(MaxRelativeDifference(ckpt / "step-6", dir_ / "full" / "step-6", kMlpLayers), 0);
  }

  fs::path dir_, plan_;
  RunResult full_;
};

TEST_F(TrainRestart, ResumesFromTheNewestCheckpointBitIdentically) {
  // Rank 1 dies in the 4th step: the checkpoint of step 2 is the newest, 3 steps were done
  // (synchronous saves: an asynchronous one may still be in flight when the rank dies).
  RunResult r = RunDapple(RestartFlags(dir_ / "ckpt", plan_) +
                              " --checkpoint-every 2 --sync-checkpoints --max-restarts 1",
                          dir_, "DAPPLE_TEST_DIE_AT=1:3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rank 1 of 2 failed (killed by signal 9)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restart 1 of 1 after rank 1 failed (killed by signal 9): resuming from "
                       "step 2, 1 completed step replayed"),
            std::string::npos)
      << r.err;
  // Steps 1-2, then 3-6 again: step 3's loss is summed while step 4 runs, which rank 1 never
  // finished (Note [Loss off the critical path]).
  ASSERT_EQ(r.Losses().size(), 2u + 4u) << r.out;
  ExpectSameAsUninterrupted(r, dir_ / "ckpt", 2);
}

TEST_F(TrainRestart, WithoutACheckpointOfThisRunItStartsAgain) {
  RunResult r =
      RunDapple(RestartFlags(dir_ / "ckpt", plan_) + " --checkpoint-every 4 --max-restarts 2", dir_,
                "DAPPLE_TEST_DIE_AT=1:1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("restart 1 of 2 after rank 1 failed (killed by signal 9): starting again "
                       "from step 0 (no checkpoint of this run yet), 1 completed step replayed"),
            std::string::npos)
      << r.err;
  ExpectSameAsUninterrupted(r, dir_ / "ckpt", 0);
}

TEST_F(TrainRestart, BadRequestsAreOneLineExitTwo) {
  RunResult r = RunDapple(RestartFlags("", plan_) + " --max-restarts 1", dir_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--max-restarts needs --checkpoint-dir"), std::string::npos) << r.err;
  r = RunDapple(RestartFlags(dir_ / "ckpt", plan_) + " --max-restarts -1", dir_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--max-restarts -1: must be 0 or more"), std::string::npos) << r.err;
  r = RunDapple(RestartFlags(dir_ / "ckpt", plan_) + " --max-restarts 2 --elastic", dir_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--elastic needs --profile and --cluster"), std::string::npos) << r.err;
  // A profile of another model: refused before anything starts.
  const std::string vgg =
      (fs::path(DAPPLE_SOURCE_DIR) / "data/profiles/dapple/vgg-19-pbs-32.txt").string();
  r = RunDapple(RestartFlags(dir_ / "ckpt", plan_) + " --max-restarts 2 --elastic --profile " +
                    vgg + " --cluster paper-a",
                dir_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--profile " + vgg + ": layers ["), std::string::npos) << r.err;
  // One process, lost for good: no device is left to plan for.
  fs::path one = WritePlan(dir_, "one", PlanJson({{"fc0", "head", {0}}}, 2, 4, "dapple-a"));
  std::string flags = RestartFlags(dir_ / "ckpt1", one) +
                      " --checkpoint-every 2 --max-restarts 3 " + "--elastic --profile " +
                      (dir_ / "profile.json").string() + " --cluster paper-a";
  flags.replace(flags.find("--nproc 2"), 9, "--nproc 1");
  std::string layers;
  for (const std::string& l : kMlpLayers)
    layers += fmt::format(R"({}{{"id": "{}", "forward_ms": 1, "backward_ms": 2,
        "activation_bytes": 1e3, "parameter_bytes": 1e3}})",
                          layers.empty() ? "" : ", ", l);
  std::ofstream(dir_ / "profile.json") << R"({"format": "dapple-profile/1", "model": "mlp",
      "batch_size": 1, "layers": [)" << layers
                                       << "]}";
  r = RunDapple(flags, dir_, "DAPPLE_TEST_DIE_AT=0:3:2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--elastic: device 0 was lost: no devices left"), std::string::npos)
      << r.err;
}

// --elastic: rank 3 dies in the 4th step of the first two starts, so its device counts as
// lost; the job is planned again for the 3 devices left (the planner, on the given profile
// and cluster) and resumes from the checkpoint of step 2 under the new plan. The global batch
// is fixed, so the losses and final weights agree with an uninterrupted run to rounding.
TEST(TrainElastic, ALostDeviceIsPlannedAwayAndTheRunAgrees) {
  fs::path dir = TestDir("elastic");
  fs::path plan = WritePlan(
      dir, "a", PlanJson({{"fc0", "fc1", {0, 1}}, {"fc2", "head", {2, 3}}}, 2, 4, "gpipe"));
  std::string layers;
  for (const std::string& l : kMlpLayers)
    layers += fmt::format(R"({}{{"id": "{}", "forward_ms": 1, "backward_ms": 2,
        "activation_bytes": 1e3, "parameter_bytes": 1e3}})",
                          layers.empty() ? "" : ", ", l);
  fs::path profile = dir / "profile.json";
  std::ofstream(profile) << R"({"format": "dapple-profile/1", "model": "mlp", "batch_size": 1,
      "layers": [)" << layers
                         << "]}";
  fs::path cluster = dir / "cluster.json";
  std::ofstream(cluster) << R"({"format": "dapple-cluster/1", "name": "four", "servers":
      [{"devices": 4}], "device": {"memory_bytes": 1e9, "speed": 1.0},
      "intra_server": {"bandwidth_bytes_per_s": 1e9, "latency_s": 1e-5}})";
  auto flags = [&](const fs::path& ckpt) {
    return std::string("train ") + kMlpFlags +
           " --dtype float64 --data synthetic --seed 3 --optimizer adam --lr 0.05 --log-json "
           "--timeout-s 30 --steps 6 --nproc 4 --plan " +
           plan.string() + " --checkpoint-dir " + ckpt.string();
  };
  RunResult full = RunDapple(flags(dir / "full"), dir);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  auto want = full.Losses();
  ASSERT_EQ(want.size(), 6u);

  RunResult r = RunDapple(flags(dir / "ckpt") + " --checkpoint-every 2 --max-restarts 3 --elastic" +
                              " --profile " + profile.string() + " --cluster " + cluster.string(),
                          dir, "DAPPLE_TEST_DIE_AT=3:3:2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rank 3 failed twice in a row: its device counts as lost"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--elastic: re-planned for 3 devices"), std::string::npos) << r.err;
  ASSERT_TRUE(fs::exists(dir / "ckpt" / "elastic-plan-3.json"));
  std::printf("the plan on 4 devices:\n%s\nthe plan after device 3 was lost:\n%s\n",
              Slurp(plan).c_str(), Slurp(dir / "ckpt" / "elastic-plan-3.json").c_str());
  auto got = r.Losses();
  ASSERT_GE(got.size(), 4u) << r.out;
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(got[got.size() - 4 + i], want[2 + i], 1e-10 * want[2 + i]) << "step " << i + 3;
  EXPECT_LT(MaxRelativeDifference(dir / "ckpt" / "step-6", dir / "full" / "step-6", kMlpLayers),
            1e-10);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dapple::testing
