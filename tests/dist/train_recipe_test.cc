// `dapple train` with a recipe as GPTs are trained (Note [Global gradient clipping],
// lr_schedule.h, Note [Recipes in checkpoints]): warm-up and decay of the learning rate,
// the gradient norm clipped over the whole pipeline, AdamW's betas and epsilon and decay
// that skips biases and normalisation weights. Checked against PyTorch's own
// clip_grad_norm_ and optimizers with a per-step rate on one device, in float64
// (tests/torch/recipe_reference.py): the losses, each step's rate and gradient norm, and the
// final weights, under plans with 1 and 2 replicas per stage, a tied parameter split across
// stages, zb-h1 and interleaved schedules, re-computation and a resume inside the warm-up.
#include <gtest/gtest.h>

#include <set>

#include "dist/script_models_dir.h"
#include "dist/train_test_util.h"

namespace dapple::testing {
namespace {

constexpr int kRecipeM = 4, kRecipeMicro = 4, kRecipeGbs = kRecipeM * kRecipeMicro,
              kRecipeSteps = 6;

class RecipeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { models_ = new fs::path(ScriptModelsDir()); }
  static std::string F(const std::string& name) { return (*models_ / name).string(); }
  static fs::path* models_;
};
fs::path* RecipeTest::models_ = nullptr;

struct RecipeModel {
  std::string file, data;
  int seq_len;
};
const RecipeModel kMlp{"mlp.pt", "mlp_data.pt", 0};
const RecipeModel kGpt{"gpt.pt", "tokens.bin", 8};

int RecipeProcesses(const std::vector<StageSpec>& stages) {
  std::set<int> devices;
  for (const auto& s : stages) devices.insert(s.devices.begin(), s.devices.end());
  return static_cast<int>(devices.size());
}

// `dapple train` of `model` under `plan` for `steps` steps with the recipe flags `recipe`
// (the same words recipe_reference.py takes), exporting the trained module to dir/trained.pt.
std::string RecipeTrainFlags(const fs::path& models, const RecipeModel& model, const fs::path& plan,
                             int nproc, const fs::path& dir, const std::string& recipe,
                             int steps = kRecipeSteps) {
  return "train --model " + (models / model.file).string() + " --plan " + plan.string() +
         " --data " + (models / model.data).string() + " --seq-len " +
         std::to_string(model.seq_len) +
         " --loss cross-entropy --no-shuffle --dtype float64 --steps " + std::to_string(steps) +
         " --nproc " + std::to_string(nproc) + " --log-json --timeout-s 60 --checkpoint-dir " +
         (dir / "ckpt").string() + " --save-model " + (dir / "trained.pt").string() + " " + recipe;
}

// What PyTorch says of the run whose --log-json lines are in `log`.
nlohmann::json RecipeReference(const fs::path& models, const RecipeModel& model,
                               const fs::path& dir, const fs::path& log,
                               const std::string& recipe) {
  fs::path json = dir / "reference.json";
  std::string cmd = std::string(DAPPLE_PYTHON " ") + DAPPLE_SOURCE_DIR +
                    "/tests/torch/recipe_reference.py " + (models / model.file).string() + " " +
                    (models / model.data).string() + " " + (dir / "trained.pt").string() + " " +
                    log.string() + " --steps " + std::to_string(kRecipeSteps) + " --gbs " +
                    std::to_string(kRecipeGbs) + " --seq-len " + std::to_string(model.seq_len) +
                    " " + recipe + " > " + json.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return nlohmann::json::parse(Slurp(json), nullptr, false);
}

// Every step's loss, rate and norm and the final weights as PyTorch's (float64 rounding:
// both sides add the same terms in other groupings); with clipping, some steps clipped and
// some not (each threshold is set between the run's norms), so both branches are compared.
void ExpectRecipeMatchesPyTorch(const nlohmann::json& j, bool clips) {
  ASSERT_TRUE(j.is_object()) << "no reference result";
  EXPECT_EQ(j["dapple_steps"], kRecipeSteps) << j.dump();
  EXPECT_LT(j["max_loss_diff"].get<double>(), 1e-10) << j.dump();
  EXPECT_LT(j["max_lr_rel_diff"].get<double>(), 1e-12) << j.dump();
  EXPECT_LT(j["max_grad_norm_rel_diff"].get<double>(), 1e-9) << j.dump();
  EXPECT_LT(j["max_param_rel_diff"].get<double>(), 1e-9) << j.dump();
  if (!clips) return;
  EXPECT_GT(j["clipped_steps"].get<int>(), 0) << "nothing clipped: " << j.dump();
  EXPECT_LT(j["clipped_steps"].get<int>(), kRecipeSteps) << "every step clipped: " << j.dump();
}

// Trains under `stages` (plan_extra: more plan fields) and compares with PyTorch; returns the
// run's folder.
fs::path RunRecipeCase(const fs::path& models, const std::string& name, const RecipeModel& model,
                       const std::vector<StageSpec>& stages, const std::string& schedule,
                       const std::string& recipe, const std::string& extra = "",
                       const nlohmann::json& plan_extra = nlohmann::json::object(), int nproc = 0) {
  fs::path dir = TestDir("recipe_" + name);
  nlohmann::json plan = nlohmann::json::parse(PlanJson(stages, kRecipeMicro, kRecipeM, schedule));
  plan.update(plan_extra);
  fs::path plan_path = WritePlan(dir, "plan", plan.dump(2));
  RunResult r =
      RunDapple(RecipeTrainFlags(models, model, plan_path,
                                 nproc > 0 ? nproc : RecipeProcesses(stages), dir, recipe) +
                    " " + extra,
                dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return dir;
  ExpectRecipeMatchesPyTorch(RecipeReference(models, model, dir, dir / "stdout.txt", recipe),
                             recipe.find("--clip-grad-norm") != std::string::npos);
  return dir;
}

const char* kTiedGptRecipe =
    "--optimizer adamw --lr 0.01 --weight-decay 0.1 --no-decay-on-norm-and-bias "
    "--adam-betas 0.9,0.95 --adam-eps 1e-6 --lr-schedule cosine --warmup-steps 2 "
    "--min-lr 0.001 --clip-grad-norm 5.5";

// The tied embedding (embed.tok.weight = head.weight) on two stages counts once in the norm;
// stage 0's two replicas count once.
TEST_F(RecipeTest, TiedGptTwoToOneReplicasCosineClippedAdamW) {
  RunRecipeCase(*models_, "gpt21", kGpt, {{"embed", "block0", {0, 1}}, {"block1", "head", {2}}},
                "dapple-a", kTiedGptRecipe);
}

// Stage 0's optimizer state sharded over its two replicas (Note [Optimizer sharding]): the
// tied embedding outside the shards, matrices and the rest in separate parts (decay on
// matrices only), the norm counted from the shards.
TEST_F(RecipeTest, TiedGptShardedOptimizerCosineClippedAdamW) {
  RunRecipeCase(*models_, "gpt21_shard", kGpt,
                {{"embed", "block0", {0, 1}}, {"block1", "head", {2}}}, "dapple-a", kTiedGptRecipe,
                "--shard-optimizer");
}

TEST_F(RecipeTest, TiedGptOneToTwoReplicasLinearWithRecompute) {
  RunRecipeCase(*models_, "gpt12", kGpt, {{"embed", "embed", {0}}, {"block0", "head", {1, 2}}},
                "dapple-a",
                "--optimizer adam --lr 0.01 --lr-schedule linear --warmup-steps 3 --min-lr 0.002 "
                "--clip-grad-norm 6",
                "--recompute");
}

// The measured trace has each rank's NORM allreduce, as the simulator's timeline.
TEST_F(RecipeTest, MlpZbH1SgdCosineClipped) {
  const fs::path trace = TestDir("recipe_mlp_zb_trace") / "trace.json";
  RunRecipeCase(*models_, "mlp_zb", kMlp, {{"fc0", "fc1", {0}}, {"fc2", "head", {1, 2}}}, "zb-h1",
                "--optimizer sgd --lr 0.1 --momentum 0.9 --lr-schedule cosine --warmup-steps 1 "
                "--clip-grad-norm 0.2",
                "--trace " + trace.string());
  const nlohmann::json t = nlohmann::json::parse(Slurp(trace), nullptr, false);
  ASSERT_TRUE(t.contains("traceEvents")) << trace;
  int norms = 0;
  for (const auto& e : t["traceEvents"]) norms += e.value("name", "") == "NORM";
  EXPECT_EQ(norms, 3);  // one per rank in the traced (last) step
}

// A sharded optimizer under a schedule that splits the backward (the buckets start in W).
TEST_F(RecipeTest, MlpZbH1ShardedSgdClipped) {
  RunRecipeCase(*models_, "mlp_zb_shard", kMlp, {{"fc0", "fc1", {0}}, {"fc2", "head", {1, 2}}},
                "zb-h1",
                "--optimizer sgd --lr 0.1 --momentum 0.9 --lr-schedule cosine --warmup-steps 1 "
                "--clip-grad-norm 0.2",
                "--shard-optimizer --bucket-mb 0.00005");
}

TEST_F(RecipeTest, MlpInterleavedAdamWClipped) {
  RunRecipeCase(
      *models_, "mlp_v2", kMlp,
      {{"fc0", "fc0", {0}}, {"fc1", "fc1", {1}}, {"fc2", "fc2", {0}}, {"head", "head", {1}}},
      "interleaved",
      "--optimizer adamw --lr 0.02 --weight-decay 0.05 --no-decay-on-norm-and-bias "
      "--lr-schedule linear --warmup-steps 2 --clip-grad-norm 0.2",
      "", {{"virtual_stages", 2}});
}

// A plan that leaves rank 0 idle: the norm reaches rank 0's progress through the loss sum.
TEST_F(RecipeTest, MlpWithIdleRankZeroReportsTheNorm) {
  RunRecipeCase(*models_, "mlp_idle", kMlp, {{"fc0", "fc1", {1, 2}}, {"fc2", "head", {3}}},
                "dapple-a",
                "--optimizer adamw --lr 0.02 --weight-decay 0.05 --lr-schedule cosine "
                "--warmup-steps 2 --clip-grad-norm 0.2",
                "", nlohmann::json::object(), 4);
}

// Stopped in step 3 of a 4-step warm-up (a checkpoint after every step), resumed under
// another plan: the schedule goes on from step 3, and the whole run is PyTorch's.
TEST_F(RecipeTest, ResumeInsideWarmUpContinuesTheSchedule) {
  const std::string recipe =
      "--optimizer adamw --lr 0.02 --weight-decay 0.05 --adam-betas 0.8,0.9 "
      "--lr-schedule cosine --warmup-steps 4 --min-lr 0.002 --clip-grad-norm 0.2";
  fs::path dir = TestDir("recipe_resume");
  fs::path a = WritePlan(
      dir, "a",
      PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, kRecipeMicro, kRecipeM, "dapple-a"));
  fs::path b = WritePlan(
      dir, "b",
      PlanJson({{"fc0", "fc0", {0, 1}}, {"fc1", "head", {2}}}, kRecipeMicro, kRecipeM, "gpipe"));
  const std::string flags = recipe + " --checkpoint-every 1";
  RunResult first =
      RunDapple(RecipeTrainFlags(*models_, kMlp, a, 2, dir, flags), dir, "DAPPLE_TEST_DIE_AT=1:3");
  ASSERT_NE(first.exit_code, 0) << "the test hook did not stop the run";
  const std::string first_out = first.out;
  RunResult rest = RunDapple(RecipeTrainFlags(*models_, kMlp, b, 3, dir, flags) + " --resume", dir);
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  ASSERT_FALSE(rest.lines.empty()) << rest.out;
  const int resumed_at = rest.lines.front().value("step", -1);
  EXPECT_TRUE(resumed_at > 0 && resumed_at < 4) << "resumed at step " << resumed_at;
  fs::path log = dir / "both.txt";
  std::ofstream(log) << first_out << rest.out;
  ExpectRecipeMatchesPyTorch(RecipeReference(*models_, kMlp, dir, log, recipe), true);
}

TEST_F(RecipeTest, BadValuesAreOneLineEach) {
  fs::path dir = TestDir("recipe_bad");
  fs::path plan =
      WritePlan(dir, "plan", PlanJson({{"fc0", "head", {0}}}, kRecipeMicro, kRecipeM, "gpipe"));
  auto train = [&](const std::string& recipe) {
    return RunDapple(RecipeTrainFlags(*models_, kMlp, plan, 1, dir, recipe), dir);
  };
  ExpectOneErrorLine(train("--clip-grad-norm -1"), {"--clip-grad-norm -1", "positive"});
  ExpectOneErrorLine(train("--warmup-steps 7"), {"--warmup-steps 7", "longer than the run"});
  ExpectOneErrorLine(train("--lr 0.01 --lr-schedule cosine --min-lr 0.1"),
                     {"--min-lr 0.1", "above --lr 0.01"});
  ExpectOneErrorLine(train("--lr-schedule step"), {"--lr-schedule step", "cosine"});
  ExpectOneErrorLine(train("--optimizer adam --adam-betas 0.9"), {"--adam-betas 0.9", "B1,B2"});
  ExpectOneErrorLine(train("--optimizer sgd --adam-eps 1e-6"), {"--adam-eps", "sgd"});
}

// A checkpoint's Adam settings hold on resume (refused in one line); a new rate is told.
TEST_F(RecipeTest, ResumeKeepsAdamSettingsAndTellsOtherChanges) {
  fs::path dir = TestDir("recipe_resume_checks");
  fs::path plan =
      WritePlan(dir, "plan", PlanJson({{"fc0", "head", {0}}}, kRecipeMicro, kRecipeM, "gpipe"));
  const std::string adam = "--optimizer adamw --weight-decay 0 --adam-betas 0.9,0.95 ";
  RunResult first = RunDapple(RecipeTrainFlags(*models_, kMlp, plan, 1, dir, adam), dir);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ExpectOneErrorLine(
      RunDapple(RecipeTrainFlags(*models_, kMlp, plan, 1, dir, adam + "--adam-eps 1e-6 --resume"),
                dir),
      {"adam_eps is 1e-08, not 1e-06", "--adam-eps 1e-08"});
  ExpectOneErrorLine(RunDapple(RecipeTrainFlags(*models_, kMlp, plan, 1, dir,
                                                adam + "--no-decay-on-norm-and-bias --resume"),
                               dir),
                     {"resume without --no-decay-on-norm-and-bias"});
  RunResult lower = RunDapple(
      RecipeTrainFlags(*models_, kMlp, plan, 1, dir, adam + "--lr 0.005 --resume", 8), dir);
  EXPECT_EQ(lower.exit_code, 0) << lower.err;
  EXPECT_NE(lower.err.find("resuming from"), std::string::npos) << lower.err;
  EXPECT_NE(lower.err.find("lr 0.005 (was 0.01)"), std::string::npos) << lower.err;
  EXPECT_NE(lower.err.find("steps 8 (was 6)"), std::string::npos) << lower.err;
}

}  // namespace
}  // namespace dapple::testing
