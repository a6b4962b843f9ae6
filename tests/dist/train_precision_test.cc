// bf16 mixed precision (Note [Mixed precision] in models/mixed_precision.h): `dapple train
// --precision bf16` trains on every schedule family, with re-computation and with optimizer
// sharding, and the loss falls; its first loss is close to float32's (and not equal: the
// forward did run in bf16); the activations a stage holds and receives are bf16 (half of
// float32's bytes); a checkpoint resumes across precisions; a plan made in another precision
// and bf16 over float64 weights each give one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "dist/script_models_dir.h"
#include "dist/train_test_util.h"

namespace dapple::testing {
namespace {

constexpr const char* kBf16Mlp =
    "--model mlp --opt input=16 --opt hidden=32 --opt layers=3 --opt classes=4";
constexpr int kSteps = 20;

std::string Bf16Flags(const std::string& precision, const fs::path& plan, int nproc,
                      int steps = kSteps) {
  return std::string("train ") + kBf16Mlp +
         " --data synthetic --seed 5 --optimizer adam --lr 0.03 " +
         "--log-json --timeout-s 60 --precision " + precision + " --steps " +
         std::to_string(steps) + " --plan " + plan.string() + " --nproc " + std::to_string(nproc);
}

struct ScheduleCase {
  std::string name, schedule;
  std::vector<StageSpec> stages;  // the chunks in model order when virtual_stages is 2
  int virtual_stages;
  std::string extra;  // more flags
  bool shard;         // stage 1 shards its optimizer state
};

std::vector<ScheduleCase> ScheduleCases() {
  const std::vector<StageSpec> two = {{"fc0", "fc1", {0}}, {"fc2", "head", {1}}};
  const std::vector<StageSpec> looped = {
      {"fc0", "fc0", {0}}, {"fc1", "fc1", {1}}, {"fc2", "fc2", {0}}, {"head", "head", {1}}};
  const std::vector<StageSpec> v = {
      {"fc0", "fc0", {0}}, {"fc1", "fc1", {1}}, {"fc2", "fc2", {1}}, {"head", "head", {0}}};
  return {{"gpipe", "gpipe", two, 1, "", false},
          {"dapple_a", "dapple-a", two, 1, "", false},
          {"dapple_b", "dapple-b", two, 1, "", false},
          {"zb_h1", "zb-h1", two, 1, "", false},
          {"zb_h2", "zb-h2", two, 1, "", false},
          {"interleaved", "interleaved", looped, 2, "", false},
          {"zb_v", "zb-v", v, 2, "", false},
          {"v_half", "v-half", v, 2, "", false},
          {"v_min", "v-min", v, 2, "", false},
          {"recompute", "dapple-a", two, 1, "--recompute", false},
          {"sharded", "dapple-a", {{"fc0", "fc1", {0}}, {"fc2", "head", {1, 2}}}, 1, "", true}};
}

fs::path WriteCasePlan(const fs::path& dir, const ScheduleCase& c) {
  nlohmann::json j = nlohmann::json::parse(PlanJson(c.stages, 8, 4, c.schedule));
  if (c.virtual_stages > 1) j["virtual_stages"] = c.virtual_stages;
  if (c.shard) j["stages"][1]["shard_optimizer"] = true;
  return WritePlan(dir, "plan", j.dump(2));
}

int Processes(const ScheduleCase& c) {
  int n = 0;
  for (const auto& s : c.stages)
    n = std::max(n, *std::max_element(s.devices.begin(), s.devices.end()) + 1);
  return n;
}

void PrintTo(const ScheduleCase& c, std::ostream* os) { *os << c.name; }

class Bf16Schedules : public ::testing::TestWithParam<ScheduleCase> {};

TEST_P(Bf16Schedules, TrainsAndTheLossFalls) {
  const ScheduleCase& c = GetParam();
  fs::path dir = TestDir("bf16_" + c.name);
  RunResult r =
      RunDapple(Bf16Flags("bf16", WriteCasePlan(dir, c), Processes(c)) + " " + c.extra, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<double> losses = r.Losses();
  ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps)) << r.out;
  for (double l : losses) ASSERT_TRUE(std::isfinite(l)) << r.out;
  double last = 0;  // the mean of the last 5 (single steps are noisy)
  for (int i = kSteps - 5; i < kSteps; ++i) last += losses[i] / 5;
  EXPECT_LT(last, 0.75 * losses[0]) << r.out;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Schedules, Bf16Schedules, ::testing::ValuesIn(ScheduleCases()),
                         [](const auto& info) { return info.param.name; });

// The same plan in float32 and bf16. The first step's loss (before any update, the same
// weights and batch) differs only by bf16's rounding: 8 significant bits, a relative error of
// at most 2^-9 per rounded value, a few roundings deep (input, two hidden layers, logits),
// with float32 accumulation inside each product; the cross-entropy of 4 classes (~1.4) moves
// well under 2%. Equal losses would mean the forward never ran in bf16. The last stage's
// live activations (its received input and its layers' outputs) are exactly half the bytes.
TEST(Bf16Training, FirstLossNearFloat32AndActivationsHalved) {
  fs::path dir = TestDir("bf16_close");
  const fs::path plan = WritePlan(
      dir, "plan", PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 8, 4, "dapple-a"));
  RunResult f32 = RunDapple(Bf16Flags("float32", plan, 2, 3), dir);
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  RunResult bf16 = RunDapple(Bf16Flags("bf16", plan, 2, 3), dir);
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  ASSERT_EQ(f32.Losses().size(), 3u);
  ASSERT_EQ(bf16.Losses().size(), 3u);
  const double a = f32.Losses()[0], b = bf16.Losses()[0];
  EXPECT_LT(std::abs(b - a), 0.02 * a) << a << " " << b;
  EXPECT_GT(std::abs(b - a), 1e-6 * a) << "bf16 computed as float32: " << a << " " << b;
  const auto s32 = f32.Summary()["stages"], s16 = bf16.Summary()["stages"];
  ASSERT_EQ(s32.size(), 2u) << f32.out;
  ASSERT_EQ(s16.size(), 2u) << bf16.out;
  EXPECT_EQ(2 * s16[1]["peak_live_activation_bytes"].get<int64_t>(),
            s32[1]["peak_live_activation_bytes"].get<int64_t>());
  // No plan precision recorded (float32) and a bf16 run: one warning line.
  EXPECT_NE(bf16.err.find("warning: the plan was made from a float32 profile; this run computes "
                          "in bf16"),
            std::string::npos)
      << bf16.err;
  EXPECT_EQ(f32.err.find("warning: the plan was made from"), std::string::npos) << f32.err;
  fs::remove_all(dir);
}

// A plan that records bf16, trained in float32: the warning names both.
TEST(Bf16Training, PlanPrecisionMismatchWarnsInOneLine) {
  fs::path dir = TestDir("bf16_mismatch");
  nlohmann::json j = nlohmann::json::parse(
      PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 8, 4, "dapple-a"));
  j["precision"] = "bf16";
  RunResult r = RunDapple(Bf16Flags("float32", WritePlan(dir, "plan", j.dump(2)), 2, 1), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string want =
      "dapple train: warning: the plan was made from a bf16 profile; this run computes in float32";
  const size_t at = r.err.find(want);
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(want, at + 1), std::string::npos) << "printed by more than one rank";
  // The same plan trained in bf16: silent.
  RunResult same = RunDapple(Bf16Flags("bf16", WritePlan(dir, "plan", j.dump(2)), 2, 1), dir);
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_EQ(same.err.find("warning: the plan was made from"), std::string::npos) << same.err;
  fs::remove_all(dir);
}

TEST(Bf16Training, RefusesFloat64MasterWeightsInOneLine) {
  fs::path dir = TestDir("bf16_f64");
  const fs::path plan = WritePlan(
      dir, "plan", PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 8, 4, "dapple-a"));
  ExpectOneErrorLine(RunDapple(Bf16Flags("bf16", plan, 2, 1) + " --dtype float64", dir),
                     {"--precision bf16", "float32 master weights", "--dtype float64"});
  ExpectOneErrorLine(RunDapple(Bf16Flags("bf17", plan, 2, 1), dir),
                     {"--precision", "unknown precision 'bf17'", "float32, bf16"});
  fs::remove_all(dir);
}

// Checkpoints hold the float32 master weights: a bf16 run resumes in float32 and the reverse,
// and the resumed steps are the uninterrupted run's in the new precision up to bf16's rounding
// of the first 3 steps (Adam's normalised steps carry it on: losses within 3%). By the last
// step the loss has fallen well beyond that (checked), so a resume that lost the weights would
// miss. The resume names the change.
TEST(Bf16Training, CheckpointsResumeAcrossPrecisions) {
  fs::path dir = TestDir("bf16_resume");
  const fs::path plan = WritePlan(
      dir, "plan", PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 8, 4, "dapple-a"));
  for (const auto& [first, then] :
       std::vector<std::pair<std::string, std::string>>{{"bf16", "float32"}, {"float32", "bf16"}}) {
    RunResult ref = RunDapple(Bf16Flags(then, plan, 2, 8), dir);
    ASSERT_EQ(ref.exit_code, 0) << ref.err;
    const std::vector<double> want = ref.Losses();
    ASSERT_EQ(want.size(), 8u) << ref.out;
    EXPECT_LT(want[7], 0.85 * want[0]) << ref.out;
    const fs::path ckpt = dir / ("ckpt-" + first);
    RunResult a =
        RunDapple(Bf16Flags(first, plan, 2, 3) + " --checkpoint-dir " + ckpt.string(), dir);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    for (const auto& [name, t] : ReadLayer(ckpt / "step-3", "fc0").params)
      EXPECT_EQ(t.scalar_type(), torch::kFloat32) << name;
    RunResult b = RunDapple(
        Bf16Flags(then, plan, 2, 8) + " --checkpoint-dir " + ckpt.string() + " --resume", dir);
    ASSERT_EQ(b.exit_code, 0) << b.err;
    ASSERT_EQ(b.Losses().size(), 5u) << b.out;
    for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(b.Losses()[i], want[3 + i], 0.03 * want[3 + i]) << i;
    EXPECT_NE(b.err.find("precision " + then + " (was " + first + ")"), std::string::npos) << b.err;
  }
  fs::remove_all(dir);
}

// A TorchScript model run by the interpreter (a GPT with tied embeddings and a (hidden, mask)
// tuple between blocks): autocast reaches its ops, the tuple crosses the boundary in bf16 and
// the first loss is near float32's.
TEST(Bf16Training, TorchScriptGptNearFloat32) {
  const fs::path models = ScriptModelsDir();
  ASSERT_FALSE(models.empty());
  fs::path dir = TestDir("bf16_gpt");
  const fs::path plan = WritePlan(
      dir, "plan", PlanJson({{"embed", "block0", {0}}, {"block1", "head", {1}}}, 4, 2, "dapple-a"));
  auto run = [&](const std::string& precision) {
    return RunDapple("train --model " + (models / "gpt.pt").string() + " --plan " + plan.string() +
                         " --data " + (models / "tokens.bin").string() +
                         " --seq-len 8 --loss cross-entropy --no-shuffle --lr 0.05 --steps 3 "
                         "--nproc 2 --log-json --timeout-s 60 --precision " +
                         precision,
                     dir);
  };
  RunResult f32 = run("float32"), bf16 = run("bf16");
  // Re-computing, stage 1 feeds the bf16 tensor it received to a layer norm (which autocast
  // runs in float32) through its re-computed block: the same losses.
  RunResult again = run("bf16 --recompute");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  ASSERT_EQ(again.Losses().size(), 3u) << again.out;
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(again.Losses()[i], bf16.Losses()[i], 1e-6 * bf16.Losses()[i]);
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  ASSERT_EQ(bf16.Losses().size(), 3u) << bf16.out;
  const double a = f32.Losses()[0], b = bf16.Losses()[0];
  EXPECT_LT(std::abs(b - a), 0.02 * a) << a << " " << b;
  EXPECT_GT(std::abs(b - a), 1e-6 * a) << "bf16 computed as float32: " << a << " " << b;
  // The last stage holds one micro-batch of 4 rows: its input (the residual stream, float32
  // in the model: 4 x 8 x 16 x 4 = 2048 bytes) as received, in bf16, and the head's logits
  // (2048 bytes in float32), which autocast computes in bf16; block1's own output stays float32.
  const auto s32 = f32.Summary()["stages"], s16 = bf16.Summary()["stages"];
  ASSERT_EQ(s16.size(), 2u) << bf16.out;
  EXPECT_EQ(s32[1]["peak_live_micro_batches"], 1);
  EXPECT_EQ(s16[1]["peak_live_micro_batches"], 1);
  EXPECT_EQ(s32[1]["peak_live_activation_bytes"].get<int64_t>() -
                s16[1]["peak_live_activation_bytes"].get<int64_t>(),
            (2048 + 2048) / 2);
  fs::remove_all(dir);
}

// Against PyTorch's own bf16 training of the same TorchScript MLP (script_models.py check
// --bf16: float32 weights, forward and loss under torch.autocast, gradients accumulated over
// the same micro-batches with the loss scaled as dapple scales it). The MLP's boundary tensors
// come out of ReLUs in bf16, so both sides run the same ops on the same values: the losses and
// weights agree to float32 rounding (measured: exactly). dapple in float32 misses by 1e-4
// (losses) and 2e-4 (weights), as would weights cast a step late.
TEST(Bf16Training, TorchScriptMlpMatchesPyTorchAutocast) {
  const fs::path models = ScriptModelsDir();
  ASSERT_FALSE(models.empty());
  const int m = 4, M = 4, steps = 6;
  // Re-computation's first forward runs without a graph; its weight casts must not be reused.
  for (const std::string extra : {"", "--recompute"}) {
    fs::path dir = TestDir("bf16_pytorch" + extra);
    const fs::path plan = WritePlan(
        dir, "plan", PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, m, M, "dapple-a"));
    const std::string exported = (dir / "trained.pt").string();
    RunResult r = RunDapple(
        "train --model " + (models / "mlp.pt").string() + " --plan " + plan.string() + " --data " +
            (models / "mlp_data.pt").string() +
            " --loss cross-entropy --no-shuffle --lr 0.05 --steps " + std::to_string(steps) +
            " --nproc 2 --log-json --timeout-s 60 --precision bf16 --save-model " + exported + " " +
            extra,
        dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(r.Losses().size(), static_cast<size_t>(steps)) << r.out;
    const nlohmann::json j =
        CheckAgainstPyTorch(r, dir, (models / "mlp.pt").string(), (models / "mlp_data.pt").string(),
                            exported, steps, m * M, 0, "--bf16 --micro-batch " + std::to_string(m));
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["steps"], steps);
    EXPECT_LT(j["max_loss_diff"].get<double>(), 1e-6) << extra << " " << j.dump();
    EXPECT_LT(j["max_param_rel_diff"].get<double>(), 1e-6) << extra << " " << j.dump();
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace dapple::testing
