// Note [Buffers in checkpoints]: a ResNet with batch norm under a hybrid plan (a replicated
// stage feeding a single one) is trained, checkpointed and resumed; its running statistics
// after the resume equal those of an uninterrupted run, as do its losses and parameters.
#include <gtest/gtest.h>

#include "train_test_util.h"

namespace dapple::testing {
namespace {

// resnet50 at width 1/16 on 16x16 images: 18 layers, batch norm in every conv.
const char* kResNetFlags =
    "--model resnet50 --opt width=0.0625 --opt image=16 --opt classes=4 --opt norm=batch";

std::vector<std::string> ResNetLayers() {
  std::vector<std::string> names = {"stem"};
  const int blocks[4] = {3, 4, 6, 3};
  for (int s = 0; s < 4; ++s)
    for (int b = 0; b < blocks[s]; ++b)
      names.push_back("layer" + std::to_string(s + 1) + "." + std::to_string(b));
  names.push_back("head");
  return names;
}

std::string BuffersFlags(const fs::path& ckpt, int steps) {
  return std::string("train ") + kResNetFlags +
         " --dtype float64 --data synthetic --seed 5 --optimizer sgd --lr 0.05 --log-json"
         " --timeout-s 60 --steps " +
         std::to_string(steps) + " --checkpoint-dir " + ckpt.string();
}

TEST(TrainBuffers, BatchNormStatisticsSurviveAResumeUnderAHybridPlan) {
  fs::path dir = TestDir("buffers");
  // Stage 0 (stem .. layer2.3) on ranks 0 and 1, each normalising over its half of every
  // micro-batch; stage 1 on rank 2. Micro-batches of 4, 2 per step.
  fs::path plan = WritePlan(
      dir, "plan",
      PlanJson({{"stem", "layer2.3", {0, 1}}, {"layer3.0", "head", {2}}}, 4, 2, "dapple-a"));
  const std::string run = " --plan " + plan.string() + " --nproc 3";
  RunResult full = RunDapple(BuffersFlags(dir / "full", 4) + run, dir);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  RunResult half = RunDapple(BuffersFlags(dir / "half", 2) + run, dir);
  ASSERT_EQ(half.exit_code, 0) << half.err;
  RunResult rest = RunDapple(BuffersFlags(dir / "half", 4) + " --resume" + run, dir);
  ASSERT_EQ(rest.exit_code, 0) << rest.err;

  const auto layers = ResNetLayers();
  const fs::path a = dir / "full" / "step-4", b = dir / "half" / "step-4";
  // The statistics moved away from their initial values (mean 0, variance 1, 0 batches), so
  // the comparison below has something to compare.
  LayerState stem = ReadLayer(a, "stem");
  ASSERT_TRUE(stem.has_buffers);
  ASSERT_TRUE(stem.buffers.count("conv.bn.running_mean"));
  EXPECT_GT(stem.buffers["conv.bn.running_mean"].abs().max().item<double>(), 0);
  EXPECT_GT(stem.buffers["conv.bn.num_batches_tracked"].item<int64_t>(), 0);
  // Resumed = uninterrupted, exactly: buffers, parameters and the losses of steps 2 and 3.
  EXPECT_EQ(MaxBufferDifference(a, b, layers), 0);
  EXPECT_EQ(MaxRelativeDifference(a, b, layers), 0);
  auto want = full.Losses(), got = rest.Losses();
  ASSERT_EQ(want.size(), 4u);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], want[2]);
  EXPECT_EQ(got[1], want[3]);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dapple::testing
