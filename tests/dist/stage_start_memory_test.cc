// A rank's memory at its start is libtorch and its own stage (Note [Probing with zeros] in
// models/script_model.cc): a TorchScript model of about 200 MB trained under 4 single-device
// stages, against a tiny model under the same plan shape. Up to its first step, every rank of
// the large model holds at most 15% more than a rank of the tiny one plus its own stage's
// parameters; the launcher, which holds no stage, less than a rank of the tiny model.
// Reading every layer to learn the output's shape put the whole model (200 MB) into every
// process, the launcher's included. Each rank and the launcher load the model once.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "dist/train_test_util.h"

namespace dapple::testing {
namespace {

// Writes a scripted nn.Sequential: Linear(16, width) + ReLU, `n` Linear(width, width) + ReLU,
// Linear(width, 10); and a data file of 16 samples of 16 features and 10 classes. Each ReLU
// joins the linear layer before it: the layers' ids are 0, 2, ..., 2n + 2.
void WriteSequential(const fs::path& dir, int n, int width) {
  const std::string write = fmt::format(
      DAPPLE_PYTHON
      " -c \"import torch, torch.nn as nn; torch.manual_seed(0); layers = [nn.Linear(16, {1}), "
      "nn.ReLU()]\nfor i in range({0}): layers += [nn.Linear({1}, {1}), nn.ReLU()]\n"
      "layers += [nn.Linear({1}, 10)]\n"
      "torch.jit.script(nn.Sequential(*layers)).save('{2}/model.pt'); torch.save({{'input': "
      "torch.randn(16, 16), 'target': torch.randint(0, 10, (16,))}}, '{2}/data.pt')\"",
      n, width, dir.string());
  ASSERT_EQ(std::system(write.c_str()), 0) << write;
}

// Trains 1 step under the 4 single-device `stages`.
RunResult TrainFourStages(const fs::path& dir, const std::vector<StageSpec>& stages) {
  const fs::path plan = WritePlan(dir, "plan", PlanJson(stages, 4, 2, "dapple-a"));
  return RunDapple("train --model " + (dir / "model.pt").string() + " --plan " + plan.string() +
                       " --data " + (dir / "data.pt").string() +
                       " --loss cross-entropy --steps 1 --nproc 4 --log-json",
                   dir);
}

int64_t LauncherFigure(const RunResult& r, const std::string& key) {
  for (const auto& j : r.lines)
    if (j.contains("launcher")) return j["launcher"][key].get<int64_t>();
  return -1;
}

int64_t LauncherPeak(const RunResult& r) { return LauncherFigure(r, "peak_resident_bytes"); }

TEST(StageStartMemory, ARankHoldsItsStageAndTheLauncherNone) {
  const fs::path tiny_dir = TestDir("start_memory_tiny"), big_dir = TestDir("start_memory_big");
  WriteSequential(tiny_dir, 3, 16);
  // 12 linear layers of 2048 x 2048: 201 MB of float32 parameters, 34-67 MB a stage.
  WriteSequential(big_dir, 12, 2048);
  const RunResult tiny = TrainFourStages(
      tiny_dir, {{"0", "2", {0}}, {"4", "4", {1}}, {"6", "6", {2}}, {"8", "8", {3}}});
  ASSERT_EQ(tiny.exit_code, 0) << tiny.err;
  const RunResult big = TrainFourStages(
      big_dir, {{"0", "6", {0}}, {"8", "14", {1}}, {"16", "20", {2}}, {"22", "26", {3}}});
  ASSERT_EQ(big.exit_code, 0) << big.err;

  int64_t tiny_rank = 0, tiny_rank_peak = -1;  // the largest start, the smallest peak
  const nlohmann::json tiny_stages = tiny.Summary()["stages"], big_stages = big.Summary()["stages"];
  for (const auto& s : tiny_stages) {
    tiny_rank = std::max(tiny_rank, s["peak_resident_before_training_bytes"].get<int64_t>());
    const int64_t peak = s["peak_resident_bytes"].get<int64_t>();
    tiny_rank_peak = tiny_rank_peak < 0 ? peak : std::min(tiny_rank_peak, peak);
  }
  ASSERT_GT(tiny_rank, 0) << tiny.out;
  const double mib = 1 << 20;
  ASSERT_EQ(big_stages.size(), 4u) << big.out;
  for (const auto& s : big_stages) {
    const double start = s["peak_resident_before_training_bytes"].get<double>();
    const double expected = tiny_rank + s["parameter_bytes"].get<double>();
    std::printf(
        "stage %d: up to the first step %.1f MiB, a tiny rank and the stage's "
        "parameters %.1f MiB, ratio %.3f\n",
        s["stage"].get<int>(), start / mib, expected / mib, start / expected);
    EXPECT_LT(start, 1.15 * expected) << "stage " << s["stage"];
    EXPECT_GT(start, 0.85 * expected) << "stage " << s["stage"];
  }
  const int64_t launcher = LauncherPeak(big);
  std::printf("launcher %.1f MiB, the smallest peak of a tiny rank %.1f MiB\n", launcher / mib,
              tiny_rank_peak / mib);
  EXPECT_GT(launcher, 0) << big.out;
  EXPECT_LT(launcher, tiny_rank_peak);
}

// Note [Stage-local models] (models/model.h): each rank loads the TorchScript file once (its
// plan check's load, in which it then materialises its stage), and so does the launcher.
TEST(StageStartMemory, ARankAndTheLauncherLoadTheModelOnce) {
  const fs::path dir = TestDir("start_memory_loads");
  WriteSequential(dir, 3, 16);
  const fs::path plan =
      WritePlan(dir, "plan", PlanJson({{"0", "2", {0}}, {"4", "8", {1}}}, 4, 2, "dapple-a"));
  const RunResult r = RunDapple("train --model " + (dir / "model.pt").string() + " --plan " +
                                    plan.string() + " --data " + (dir / "data.pt").string() +
                                    " --loss cross-entropy --steps 1 --nproc 2 --log-json",
                                dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json stages = r.Summary()["stages"];
  ASSERT_EQ(stages.size(), 2u) << r.out;
  for (const auto& s : stages) EXPECT_EQ(s["model_loads"].get<int>(), 1) << s.dump();
  EXPECT_EQ(LauncherFigure(r, "model_loads"), 1) << r.out;
}

}  // namespace
}  // namespace dapple::testing
