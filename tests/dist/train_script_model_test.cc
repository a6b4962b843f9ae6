// `dapple train` on users' TorchScript models (docs/your-model.md), checked against
// PyTorch's own training of the same file on the same batches (tests/torch/script_models.py):
// a sequential MLP and a GPT with tied embeddings and a (hidden, mask) tuple between blocks,
// under plans with different replica counts per stage, in float64. The trained module
// comes back through --save-model and is compared in Python after torch.jit.load.
#include <gtest/gtest.h>

#include "dist/script_models_dir.h"
#include "dist/train_test_util.h"

namespace dapple::testing {
namespace {

class ScriptModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(ScriptModelsDir());  // read only
  }
  static std::string F(const std::string& name) { return (*dir_ / name).string(); }
  static fs::path* dir_;
};
fs::path* ScriptModelTest::dir_ = nullptr;

struct Case {
  std::string name, model, data;
  int seq_len;
  std::vector<StageSpec> stages;
  std::string extra;         // more `dapple train` flags
  std::string python_flags;  // the same training for script_models.py check
};

// Checks PyTorch's verdict: the same losses and final weights to float64 rounding (both sides
// add the same terms in different groupings: slices, replicas).
void ExpectSameAsPyTorch(const nlohmann::json& j, int steps) {
  if (!j.is_object()) {
    ADD_FAILURE() << "no check result";
    return;
  }
  EXPECT_EQ(j["steps"], steps);
  EXPECT_LT(j["max_loss_diff"].get<double>(), 1e-10) << j.dump();
  EXPECT_LT(j["max_param_rel_diff"].get<double>(), 1e-10) << j.dump();
}

std::string TrainFlags(const Case& c, const fs::path& models, const fs::path& plan, int steps,
                       int nproc, const fs::path& dir, const std::string& exported) {
  return "train --model " + (models / c.model).string() + " --plan " + plan.string() + " --data " +
         (models / c.data).string() + " --seq-len " + std::to_string(c.seq_len) +
         " --loss cross-entropy --no-shuffle --dtype float64 --lr 0.05 --steps " +
         std::to_string(steps) + " --nproc " + std::to_string(nproc) +
         " --log-json --timeout-s 60 --checkpoint-dir " + (dir / "ckpt").string() +
         " --save-model " + exported + " " + c.extra;
}

// Returns the run's folder (its checkpoints are under ckpt/).
fs::path RunCase(const Case& c, const fs::path& models) {
  fs::path dir = TestDir("script_" + c.name);
  const int m = 4, M = 4, steps = 4, gbs = m * M;
  fs::path plan = WritePlan(dir, "plan", PlanJson(c.stages, m, M, "dapple-a"));
  int nproc = 0;
  for (const auto& s : c.stages) nproc += static_cast<int>(s.devices.size());
  std::string exported = (dir / "trained.pt").string();
  RunResult r = RunDapple(TrainFlags(c, models, plan, steps, nproc, dir, exported), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.Losses().size() != static_cast<size_t>(steps)) {
    ADD_FAILURE() << "expected " << steps << " losses\n" << r.out << r.err;
    return dir;
  }
  ExpectSameAsPyTorch(
      CheckAgainstPyTorch(r, dir, (models / c.model).string(), (models / c.data).string(), exported,
                          steps, gbs, c.seq_len, c.python_flags),
      steps);
  return dir;
}

TEST_F(ScriptModelTest, MlpMatchesPyTorchOneToTwoReplicas) {
  RunCase(
      {"mlp12", "mlp.pt", "mlp_data.pt", 0, {{"fc0", "fc1", {0}}, {"fc2", "head", {1, 2}}}, "", ""},
      *dir_);
}

TEST_F(ScriptModelTest, MlpMatchesPyTorchTwoToOneReplicas) {
  RunCase(
      {"mlp21", "mlp.pt", "mlp_data.pt", 0, {{"fc0", "fc0", {0, 1}}, {"fc1", "head", {2}}}, "", ""},
      *dir_);
}

// The tied embedding (embed.tok.weight = head.weight) lands on two stages; the mask goes
// whole across the boundary, the hidden states by rows.
TEST_F(ScriptModelTest, TiedTupleGptMatchesPyTorch) {
  fs::path dir = RunCase({"gpt21",
                          "gpt.pt",
                          "tokens.bin",
                          8,
                          {{"embed", "block0", {0, 1}}, {"block1", "head", {2}}},
                          "",
                          ""},
                         *dir_);
  // Both stages' copies of the tied matrix are still one value, bit for bit.
  fs::path step = CheckpointStepDir(dir / "ckpt", 4);
  torch::Tensor embed = ReadLayer(step, "embed").params.at("embed.tok.weight");
  torch::Tensor head = ReadLayer(step, "head").params.at("head.weight");
  EXPECT_TRUE(embed.equal(head));
}

TEST_F(ScriptModelTest, TiedTupleGptWithRecomputeMatchesPyTorch) {
  RunCase({"gpt12r",
           "gpt.pt",
           "tokens.bin",
           8,
           {{"embed", "embed", {0}}, {"block0", "head", {1, 2}}},
           "--recompute",
           ""},
          *dir_);
}

// AdamW with weight decay: per-parameter state on two stages, decoupled decay.
TEST_F(ScriptModelTest, MlpWithAdamWMatchesPyTorch) {
  RunCase({"mlp21w",
           "mlp.pt",
           "mlp_data.pt",
           0,
           {{"fc0", "fc0", {0, 1}}, {"fc1", "head", {2}}},
           "--optimizer adamw --weight-decay 0.02",
           "--optimizer adamw --weight-decay 0.02"},
          *dir_);
}

// Training stopped after 2 of 4 steps (a checkpoint every step) and resumed under another plan
// ends where PyTorch's uninterrupted 4 steps end: the optimizer state (Adam moments and step
// counts) travels through the checkpoint.
TEST_F(ScriptModelTest, CheckpointEveryStepThenResumeMatchesPyTorch) {
  Case c{"mlp_resume",      "mlp.pt", "mlp_data.pt", 0, {}, "--optimizer adam --checkpoint-every 1",
         "--optimizer adam"};
  fs::path dir = TestDir("script_mlp_resume");
  const int m = 4, M = 4, gbs = m * M;
  fs::path a =
      WritePlan(dir, "a", PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, m, M, "dapple-a"));
  fs::path b =
      WritePlan(dir, "b", PlanJson({{"fc0", "fc0", {0}}, {"fc1", "head", {1, 2}}}, m, M, "gpipe"));
  std::string exported = (dir / "trained.pt").string();
  RunResult first = RunDapple(TrainFlags(c, *dir_, a, 2, 2, dir, exported), dir);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_TRUE(fs::exists(dir / "ckpt" / "step-1")) << "--checkpoint-every 1 kept no step 1";
  RunResult rest = RunDapple(TrainFlags(c, *dir_, b, 4, 3, dir, exported) + " --resume", dir);
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  RunResult both = first;
  both.lines.insert(both.lines.end(), rest.lines.begin(), rest.lines.end());  // steps 1-2, 3-4
  ASSERT_EQ(both.Losses().size(), 4u) << first.out << rest.out;
  ExpectSameAsPyTorch(
      CheckAgainstPyTorch(both, dir, (*dir_ / c.model).string(), (*dir_ / c.data).string(),
                          exported, 4, gbs, 0, c.python_flags),
      4);
}

}  // namespace
}  // namespace dapple::testing
