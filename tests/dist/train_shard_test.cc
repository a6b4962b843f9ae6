// Optimizer sharding (Note [Optimizer sharding], sharded_optimizer.h): a stage of 4 replicas
// that shards its optimizer state trains as the same stage unsharded (float64, 20 steps, 1e-9
// relative) with Adam, AdamW and SGD with momentum, its checkpoints hold the same whole
// per-parameter state, each of its ranks holds at most 0.3 of the unsharded state, and a
// checkpoint of one resumes under the other plan (other stages) as the uninterrupted run.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "train_test_util.h"

namespace dapple::testing {
namespace {

// 85 head parameters: the last bucket's buffer is padded to 88 for 4 shards.
constexpr const char* kShardMlp =
    "--model mlp --opt input=7 --opt hidden=16 --opt layers=3 --opt classes=5";
const std::vector<std::string> kShardLayers = {"fc0", "fc1", "fc2", "head"};
constexpr int kShardSteps = 20;

// Stage 1 (fc1..head) on 4 replicas, sharded when `shard`; a bucket per layer (--bucket-mb).
std::string FourReplicaPlan(bool shard) {
  nlohmann::json plan = nlohmann::json::parse(
      PlanJson({{"fc0", "fc0", {0}}, {"fc1", "head", {1, 2, 3, 4}}}, 4, 2, "dapple-a"));
  if (shard) plan["stages"][1]["shard_optimizer"] = true;
  return plan.dump(2);
}

// Another plan of other stages, unsharded: 2 stages of 1 device.
std::string OtherPlan() {
  return PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 4, 2, "gpipe");
}

std::string ShardFlags(const std::string& optimizer, const fs::path& ckpt, int steps) {
  return std::string("train ") + kShardMlp + " --dtype float64 --data synthetic --seed 3 --steps " +
         std::to_string(steps) + " " + optimizer +
         " --bucket-mb 0.002 --log-json --timeout-s 60 --checkpoint-dir " + ckpt.string();
}

// Largest |a-b| / max(|b|, 1e-12) over every optimizer-state tensor of two checkpoints; a
// parameter or field in one and not the other is a failure.
double MaxStateDifference(const fs::path& a, const fs::path& b) {
  double worst = 0;
  for (const auto& layer : kShardLayers) {
    LayerState x = ReadLayer(a, layer), y = ReadLayer(b, layer);
    EXPECT_EQ(x.optimizer.size(), y.optimizer.size()) << layer;
    for (const auto& [param, fields] : y.optimizer) {
      EXPECT_EQ(x.optimizer[param].size(), fields.size()) << layer << " " << param;
      for (const auto& [field, t] : fields) {
        auto it = x.optimizer[param].find(field);
        if (it == x.optimizer[param].end()) {
          ADD_FAILURE() << layer << " " << param << ": no " << field;
          return 1e300;
        }
        const torch::Tensor u = it->second.to(torch::kFloat64), v = t.to(torch::kFloat64);
        EXPECT_EQ(u.sizes(), v.sizes()) << layer << " " << param << " " << field;
        if (u.sizes() != v.sizes()) return 1e300;
        worst = std::max(worst, (u - v).abs().max().item<double>() /
                                    std::max(v.abs().max().item<double>(), 1e-12));
      }
    }
  }
  return worst;
}

struct ShardCase {
  std::string name, optimizer;
};

class ShardedTraining : public ::testing::TestWithParam<ShardCase> {};

TEST_P(ShardedTraining, EqualsUnshardedWithAQuarterOfTheState) {
  const ShardCase& c = GetParam();
  fs::path dir = TestDir("shard_" + c.name);
  RunResult whole =
      RunDapple(ShardFlags(c.optimizer, dir / "whole", kShardSteps) + " --plan " +
                    WritePlan(dir, "whole", FourReplicaPlan(false)).string() + " --nproc 5",
                dir);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  RunResult sharded =
      RunDapple(ShardFlags(c.optimizer, dir / "sharded", kShardSteps) + " --plan " +
                    WritePlan(dir, "sharded", FourReplicaPlan(true)).string() + " --nproc 5",
                dir);
  ASSERT_EQ(sharded.exit_code, 0) << sharded.err;
  const std::string step = "step-" + std::to_string(kShardSteps);
  EXPECT_LT(MaxRelativeDifference(dir / "sharded" / step, dir / "whole" / step, kShardLayers),
            1e-9);
  EXPECT_LT(MaxStateDifference(dir / "sharded" / step, dir / "whole" / step), 1e-9);
  const auto losses = sharded.Losses(), ref = whole.Losses();
  ASSERT_EQ(losses.size(), static_cast<size_t>(kShardSteps));
  ASSERT_EQ(ref.size(), losses.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(losses[i], ref[i], 1e-9 * ref[i]) << i;
  EXPECT_GT(DistanceFromInitial(
                "mlp", {{"input", "7"}, {"hidden", "16"}, {"layers", "3"}, {"classes", "5"}}, 3,
                dir / "whole" / step),
            1e-2)
      << "training did not move";
  // Each rank's own optimizer state (the largest of the stage's ranks).
  const auto s = sharded.Summary()["stages"], w = whole.Summary()["stages"];
  ASSERT_EQ(s.size(), 2u) << sharded.out;
  EXPECT_TRUE(s[1]["shard_optimizer"].get<bool>());
  EXPECT_FALSE(w[1]["shard_optimizer"].get<bool>());
  const double ratio =
      s[1]["optimizer_state_bytes"].get<double>() / w[1]["optimizer_state_bytes"].get<double>();
  EXPECT_GT(ratio, 0.2);
  EXPECT_LE(ratio, 0.3);
  EXPECT_EQ(s[0]["optimizer_state_bytes"], w[0]["optimizer_state_bytes"]);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ShardedTraining,
                         ::testing::Values(ShardCase{"adam", "--optimizer adam --lr 0.01"},
                                           ShardCase{"adamw",
                                                     "--optimizer adamw --lr 0.01 "
                                                     "--weight-decay 0.1"},
                                           ShardCase{"sgd",
                                                     "--optimizer sgd --lr 0.05 --momentum 0.9"}),
                         [](const auto& info) { return info.param.name; });

// Half the run sharded, then resumed under an unsharded plan of other stages (and the
// reverse): both equal the uninterrupted unsharded run.
TEST(ShardedCheckpoint, ResumesUnderOtherPlansAsTheUninterruptedRun) {
  const std::string adam = "--optimizer adam --lr 0.01";
  fs::path dir = TestDir("shard_resume");
  const fs::path sharded = WritePlan(dir, "sharded", FourReplicaPlan(true));
  const fs::path other = WritePlan(dir, "other", OtherPlan());
  RunResult ref = RunDapple(
      ShardFlags(adam, dir / "ref", kShardSteps) + " --plan " + other.string() + " --nproc 2", dir);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const std::string step = "step-" + std::to_string(kShardSteps);
  struct Leg {
    fs::path plan;
    int nproc;
  };
  const std::vector<std::pair<Leg, Leg>> cases = {{{sharded, 5}, {other, 2}},
                                                  {{other, 2}, {sharded, 5}}};
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto& [first, second] = cases[k];
    const fs::path ckpt = dir / ("ckpt" + std::to_string(k));
    RunResult a = RunDapple(ShardFlags(adam, ckpt, kShardSteps / 2) + " --plan " +
                                first.plan.string() + " --nproc " + std::to_string(first.nproc),
                            dir);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    RunResult b = RunDapple(ShardFlags(adam, ckpt, kShardSteps) + " --resume --plan " +
                                second.plan.string() + " --nproc " + std::to_string(second.nproc),
                            dir);
    ASSERT_EQ(b.exit_code, 0) << b.err;
    ASSERT_EQ(b.Losses().size(), static_cast<size_t>(kShardSteps / 2)) << b.out;
    EXPECT_LT(MaxRelativeDifference(ckpt / step, dir / "ref" / step, kShardLayers), 1e-9) << k;
    EXPECT_LT(MaxStateDifference(ckpt / step, dir / "ref" / step), 1e-9) << k;
  }
  fs::remove_all(dir);
}

TEST(ShardedPlan, ShardingAStageOfOneDeviceIsOneLine) {
  fs::path dir = TestDir("shard_bad");
  nlohmann::json plan = nlohmann::json::parse(OtherPlan());
  plan["stages"][1]["shard_optimizer"] = true;
  RunResult r = RunDapple(ShardFlags("--optimizer adam", dir / "ckpt", 1) + " --plan " +
                              WritePlan(dir, "one", plan.dump()).string() + " --nproc 2",
                          dir);
  ExpectOneErrorLine(r, {"stages[1].shard_optimizer", "1 device"});
  plan["stages"][1]["shard_optimizer"] = "yes";
  r = RunDapple(ShardFlags("--optimizer adam", dir / "ckpt", 1) + " --plan " +
                    WritePlan(dir, "text", plan.dump()).string() + " --nproc 2",
                dir);
  ExpectOneErrorLine(r, {"shard_optimizer"});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dapple::testing
