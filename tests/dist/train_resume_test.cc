// `dapple train --resume` continues from a per-layer checkpoint with the identical loss
// sequence, under the same plan and under a different one.
#include <gtest/gtest.h>

#include "train_test_util.h"

namespace dapple::testing {
namespace {

std::string ResumeFlags(const fs::path& ckpt, int steps, const std::string& optimizer) {
  return std::string("train ") + kMlpFlags +
         " --dtype float64 --data synthetic --seed 3 --optimizer " + optimizer +
         " --lr 0.05 --log-json --timeout-s 30 --steps " + std::to_string(steps) +
         " --checkpoint-dir " + ckpt.string();
}

class TrainResume : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainResume, SameLossesUnderSameAndDifferentPlan) {
  const std::string optimizer = GetParam();
  fs::path dir = TestDir("resume_" + optimizer);
  // Plan A: 2 stages x 1 replica; plan B: 3 stages 1:2:1 (same GBS 8).
  fs::path a =
      WritePlan(dir, "a", PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 2, 4, "dapple-a"));
  fs::path b =
      WritePlan(dir, "b",
                PlanJson({{"fc0", "fc0", {0}}, {"fc1", "fc2", {1, 2}}, {"head", "head", {3}}}, 4, 2,
                         "gpipe"));

  RunResult full = RunDapple(
      ResumeFlags(dir / "full", 4, optimizer) + " --plan " + a.string() + " --nproc 2", dir);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  auto want = full.Losses();
  ASSERT_EQ(want.size(), 4u);

  RunResult half = RunDapple(
      ResumeFlags(dir / "half", 2, optimizer) + " --plan " + a.string() + " --nproc 2", dir);
  ASSERT_EQ(half.exit_code, 0) << half.err;
  ASSERT_TRUE(fs::exists(dir / "half" / "step-2" / "fc0.pt"));
  fs::copy(dir / "half", dir / "half2", fs::copy_options::recursive);

  // Same plan: bit-identical continuation.
  RunResult same = RunDapple(
      ResumeFlags(dir / "half", 4, optimizer) + " --resume --plan " + a.string() + " --nproc 2",
      dir);
  ASSERT_EQ(same.exit_code, 0) << same.err;
  auto got = same.Losses();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], want[2]);
  EXPECT_EQ(got[1], want[3]);

  // Different plan (4 processes, other micro-batching and schedule): same to rounding.
  RunResult other = RunDapple(
      ResumeFlags(dir / "half2", 4, optimizer) + " --resume --plan " + b.string() + " --nproc 4",
      dir);
  ASSERT_EQ(other.exit_code, 0) << other.err;
  got = other.Losses();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NEAR(got[0], want[2], 1e-10 * want[2]);
  EXPECT_NEAR(got[1], want[3], 1e-10 * want[3]);
  EXPECT_LT(MaxRelativeDifference(dir / "half2" / "step-4", dir / "full" / "step-4", kMlpLayers),
            1e-10);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TrainResume, ::testing::Values("sgd", "adam"));

TEST(TrainResumeAuto, ARetryLoopStartsFreshThenResumes) {
  // What a retry loop does (a shell loop, a Slurm requeue): the same command each time.
  fs::path dir = TestDir("resume_auto");
  fs::path plan =
      WritePlan(dir, "a", PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 2, 4, "dapple-a"));
  RunResult full = RunDapple(
      ResumeFlags(dir / "full", 6, "adam") + " --plan " + plan.string() + " --nproc 2", dir);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  auto want = full.Losses();
  ASSERT_EQ(want.size(), 6u);

  // Synchronous saves: the checkpoint of step 2 is committed before step 3 starts (an
  // asynchronous one may still be in flight when rank 1 dies, Note [Asynchronous
  // checkpoints]).
  const std::string cmd = ResumeFlags(dir / "ckpt", 6, "adam") +
                          " --checkpoint-every 2 --sync-checkpoints --resume auto --plan " +
                          plan.string() + " --nproc 2";
  // First attempt: no checkpoint yet, so it starts fresh; rank 1 dies during step 3, after
  // the checkpoint of step 2.
  RunResult first = RunDapple(cmd, dir, "DAPPLE_TEST_DIE_AT=1:3");
  EXPECT_NE(first.exit_code, 0);
  EXPECT_NE(first.err.find("--resume auto: no checkpoint in"), std::string::npos) << first.err;
  // Steps 1 and 2 printed: step 3's loss is summed while step 4 runs, which never ends
  // (Note [Loss off the critical path]).
  auto got = first.Losses();
  ASSERT_EQ(got.size(), 2u) << first.out;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;

  // Second attempt, the same command: resumes from step 2 and finishes bit-identically.
  RunResult second = RunDapple(cmd, dir);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("--resume auto: resuming from"), std::string::npos) << second.err;
  got = second.Losses();
  ASSERT_EQ(got.size(), 4u) << second.out;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i + 2]) << "step " << i + 2;
  EXPECT_EQ(MaxRelativeDifference(dir / "ckpt" / "step-6", dir / "full" / "step-6", kMlpLayers), 0);

  // Any other value is bad input.
  RunResult bad = RunDapple(ResumeFlags(dir / "ckpt", 6, "adam") + " --resume sometimes --plan " +
                                plan.string() + " --nproc 2",
                            dir);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--resume sometimes"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

// zb-h1 (split backward) saves and resumes like the others: 2 steps, then 2 more from the
// checkpoint, under a replicated zb-h1 plan, give the losses of 4 uninterrupted dapple-a
// steps.
TEST(TrainResume, ZbH1ResumesFromACheckpoint) {
  fs::path dir = TestDir("resume_zb");
  fs::path a =
      WritePlan(dir, "a", PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 2, 4, "dapple-a"));
  fs::path zb =
      WritePlan(dir, "zb",
                PlanJson({{"fc0", "fc0", {0}}, {"fc1", "fc2", {1, 2}}, {"head", "head", {3}}}, 2, 4,
                         "zb-h1"));
  RunResult full =
      RunDapple(ResumeFlags(dir / "full", 4, "adam") + " --plan " + a.string() + " --nproc 2", dir);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  auto want = full.Losses();
  ASSERT_EQ(want.size(), 4u);
  RunResult half =
      RunDapple(ResumeFlags(dir / "zb", 2, "adam") + " --plan " + zb.string() + " --nproc 4", dir);
  ASSERT_EQ(half.exit_code, 0) << half.err;
  RunResult rest = RunDapple(
      ResumeFlags(dir / "zb", 4, "adam") + " --resume --plan " + zb.string() + " --nproc 4", dir);
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  auto got = rest.Losses();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NEAR(got[0], want[2], 1e-10 * want[2]);
  EXPECT_NEAR(got[1], want[3], 1e-10 * want[3]);
  EXPECT_LT(MaxRelativeDifference(dir / "zb" / "step-4", dir / "full" / "step-4", kMlpLayers),
            1e-10);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dapple::testing
