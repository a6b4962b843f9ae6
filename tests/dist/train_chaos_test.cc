// The chaos test: a 200-step run of 4 processes under a hybrid plan (replicas
// 1:2:1) has a rank killed at 5 pseudo-random points, two of them inside a checkpoint write;
// `--max-restarts` brings it back each time (Note [Restarts]) and it ends with the same final
// loss and weights, bit for bit, as the uninterrupted run. Prints the time lost per failure
// and the launcher's restart lines (detection: "stopped after"; replay: steps replayed).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>

#include "train_test_util.h"

namespace dapple::testing {
namespace {

TEST(TrainChaos, FiveKillsThenTheUninterruptedResult) {
  fs::path dir = TestDir("chaos");
  fs::path plan =
      WritePlan(dir, "a",
                PlanJson({{"fc0", "fc0", {0}}, {"fc1", "fc2", {1, 2}}, {"head", "head", {3}}}, 4, 2,
                         "dapple-a"));
  auto flags = [&](const fs::path& ckpt) {
    return std::string("train ") + kMlpFlags +
           " --dtype float64 --data synthetic --seed 11 --optimizer adam --lr 0.01 --log-json "
           "--timeout-s 5 --steps 200 --nproc 4 --checkpoint-every 10 --plan " +
           plan.string() + " --checkpoint-dir " + ckpt.string();
  };
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  RunResult full = RunDapple(flags(dir / "full"), dir);
  const double full_s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(full.exit_code, 0) << full.err;
  ASSERT_EQ(full.Losses().size(), 200u);

  // Five kills at increasing pseudo-random steps; the 2nd and 4th inside the save after a
  // multiple of 10 steps (by a rank that writes layer files: replica 0 of a stage).
  std::mt19937 rng(2026);
  std::string chaos;
  int step = 0;
  for (int k = 0; k < 5; ++k) {
    step += 20 + static_cast<int>(rng() % 20);
    const bool in_save = k == 1 || k == 3;
    const int rank = in_save ? std::vector<int>{0, 1, 3}[rng() % 3] : static_cast<int>(rng() % 4);
    const int at = in_save ? (step / 10) * 10 : step;
    chaos +=
        (k ? "," : "") + std::to_string(rank) + ":" + std::to_string(at) + (in_save ? ":save" : "");
  }
  t0 = Clock::now();
  RunResult r =
      RunDapple(flags(dir / "ckpt") + " --max-restarts 5", dir, "DAPPLE_TEST_CHAOS=" + chaos);
  const double chaos_s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;

  int restarts = 0;
  std::istringstream err(r.err);
  std::printf("DAPPLE_TEST_CHAOS=%s\n", chaos.c_str());
  for (std::string line; std::getline(err, line);) {
    if (line.rfind("dapple train:", 0) != 0) continue;
    std::printf("  %s\n", line.c_str());
    if (line.find(": restart ") != std::string::npos) ++restarts;
  }
  EXPECT_EQ(restarts, 5) << r.err;
  std::printf("uninterrupted %.1f s, with 5 failures %.1f s: %.1f s lost per failure\n", full_s,
              chaos_s, (chaos_s - full_s) / 5);

  auto want = full.Losses(), got = r.Losses();
  ASSERT_GE(got.size(), 200u);
  EXPECT_EQ(got.back(), want.back());
  EXPECT_EQ(MaxRelativeDifference(dir / "ckpt" / "step-200", dir / "full" / "step-200", kMlpLayers),
            0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dapple::testing
