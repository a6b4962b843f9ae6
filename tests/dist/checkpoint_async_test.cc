// Note [Asynchronous checkpoints] (runtime/checkpoint/async_checkpoint.h): checkpoints written by
// the background writer are the bytes a synchronous save writes, every one of them is committed
// (the end of training waits for the last), and the losses do not change. A kill inside the
// writer is tested by CheckpointDamage.KilledWhileSavingKeepsThePreviousCheckpoint and
// TrainChaos (saving is asynchronous by default).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "train_test_util.h"

namespace dapple::testing {
namespace {

TEST(CheckpointAsync, WritesWhatASynchronousSaveWritesAndCommitsEveryOne) {
  fs::path dir = TestDir("ckpt_async");
  // Stage 0 on two replicas (only replica 0 writes), stage 1 on one: every rank confirms.
  fs::path plan = WritePlan(
      dir, "a", PlanJson({{"fc0", "fc1", {0, 1}}, {"fc2", "head", {2}}}, 2, 4, "dapple-a"));
  auto flags = [&](const fs::path& ckpt) {
    return std::string("train ") + kMlpFlags +
           " --dtype float64 --data synthetic --seed 5 --optimizer adam --lr 0.05 --log-json "
           "--timeout-s 30 --steps 5 --nproc 3 --checkpoint-every 1 --plan " +
           plan.string() + " --checkpoint-dir " + ckpt.string();
  };
  RunResult async = RunDapple(flags(dir / "async"), dir);
  ASSERT_EQ(async.exit_code, 0) << async.err;
  RunResult sync = RunDapple(flags(dir / "sync") + " --sync-checkpoints", dir);
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  EXPECT_EQ(async.Losses(), sync.Losses());
  ASSERT_EQ(async.Losses().size(), 5u);
  EXPECT_EQ(Slurp(dir / "async" / "latest"), "step-5\n");
  for (int step = 1; step <= 5; ++step) {
    const std::string name = fmt::format("step-{}", step);
    ASSERT_TRUE(fs::exists(dir / "async" / name / "meta.json")) << name;
    CheckpointMeta a = ReadCheckpointMeta(dir / "async" / name),
                   s = ReadCheckpointMeta(dir / "sync" / name);
    EXPECT_EQ(a.losses, s.losses) << name;
    ASSERT_EQ(a.files.size(), kMlpLayers.size()) << name;
    for (const std::string& layer : kMlpLayers) {
      EXPECT_EQ(a.files[layer].crc32, s.files[layer].crc32) << name << " " << layer;
      EXPECT_EQ(Slurp(LayerFile(dir / "async" / name, layer)),
                Slurp(LayerFile(dir / "sync" / name, layer)))
          << name << " " << layer;
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dapple::testing
