// `dapple train` on users' TorchScript models (docs/your-model.md), checked against
// PyTorch's own training of the same file on the same batches (tests/torch/script_models.py):
// a sequential MLP and a GPT with tied embeddings and a (hidden, mask) tuple between blocks,
// under plans with different replica counts per stage, in float64. The trained module
// comes back through --save-model and is compared in Python after torch.jit.load.
#include <gtest/gtest.h>

#include "dist/train_test_util.h"

namespace dapple::testing {
namespace {

const char* kPython = "/usr/bin/python3";

class ScriptModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(TestDir("script_models"));
    std::string cmd = std::string(kPython) + " " + DAPPLE_SOURCE_DIR +
                      "/tests/torch/script_models.py write " + dir_->string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static std::string F(const std::string& name) { return (*dir_ / name).string(); }
  static fs::path* dir_;
};
fs::path* ScriptModelTest::dir_ = nullptr;

// What PyTorch says of a dapple run: {"max_loss_diff", "max_param_rel_diff", ...}.
nlohmann::json CheckAgainstPyTorch(const RunResult& r, const fs::path& dir,
                                   const std::string& model, const std::string& data,
                                   const std::string& exported, int steps, int gbs, int seq_len) {
  fs::path losses = dir / "losses.txt";
  {
    std::ofstream out(losses);
    out.precision(17);
    for (double l : r.Losses()) out << l << "\n";
  }
  fs::path json = dir / "check.json";
  std::string cmd = std::string(kPython) + " " + DAPPLE_SOURCE_DIR +
                    "/tests/torch/script_models.py check " + model + " " + data + " " + exported +
                    " " + losses.string() + " --steps " + std::to_string(steps) + " --gbs " +
                    std::to_string(gbs) + " --seq-len " + std::to_string(seq_len) + " > " +
                    json.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return nlohmann::json::parse(Slurp(json), nullptr, false);
}

struct Case {
  std::string name, model, data;
  int seq_len;
  std::vector<StageSpec> stages;
  std::string extra;
};

// Returns the run's folder (its checkpoints are under ckpt/).
fs::path RunCase(const Case& c, const fs::path& models) {
  fs::path dir = TestDir("script_" + c.name);
  const int m = 4, M = 4, steps = 4, gbs = m * M;
  fs::path plan = WritePlan(dir, "plan", PlanJson(c.stages, m, M, "dapple-a"));
  int nproc = 0;
  for (const auto& s : c.stages) nproc += static_cast<int>(s.devices.size());
  std::string exported = (dir / "trained.pt").string();
  RunResult r = RunDapple(
      "train --model " + (models / c.model).string() + " --plan " + plan.string() + " --data " +
          (models / c.data).string() + " --seq-len " + std::to_string(c.seq_len) +
          " --loss cross-entropy --no-shuffle --dtype float64 --lr 0.05 --steps " +
          std::to_string(steps) + " --nproc " + std::to_string(nproc) +
          " --log-json --timeout-s 60" + " --checkpoint-dir " + (dir / "ckpt").string() +
          " --save-model " + exported + " " + c.extra,
      dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.Losses().size() != static_cast<size_t>(steps)) {
    ADD_FAILURE() << "expected " << steps << " losses\n" << r.out << r.err;
    return dir;
  }
  nlohmann::json j =
      CheckAgainstPyTorch(r, dir, (models / c.model).string(), (models / c.data).string(), exported,
                          steps, gbs, c.seq_len);
  if (!j.is_object()) {
    ADD_FAILURE() << "no check result";
    return dir;
  }
  EXPECT_EQ(j["steps"], steps);
  // float64: both sides add the same terms in different groupings (slices, replicas).
  EXPECT_LT(j["max_loss_diff"].get<double>(), 1e-10) << j.dump();
  EXPECT_LT(j["max_param_rel_diff"].get<double>(), 1e-10) << j.dump();
  return dir;
}

TEST_F(ScriptModelTest, MlpMatchesPyTorchOneToTwoReplicas) {
  RunCase({"mlp12", "mlp.pt", "mlp_data.pt", 0, {{"fc0", "fc1", {0}}, {"fc2", "head", {1, 2}}}, ""},
          *dir_);
}

TEST_F(ScriptModelTest, MlpMatchesPyTorchTwoToOneReplicas) {
  RunCase({"mlp21", "mlp.pt", "mlp_data.pt", 0, {{"fc0", "fc0", {0, 1}}, {"fc1", "head", {2}}}, ""},
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
                          ""},
                         *dir_);
  // Both stages' copies of the tied matrix are still one value, bit for bit.
  fs::path step = CheckpointStepDir(dir / "ckpt", 4);
  torch::Tensor embed = ReadLayer(step, "embed").params.at("tok.weight");
  torch::Tensor head = ReadLayer(step, "head").params.at("weight");
  EXPECT_TRUE(embed.equal(head));
}

TEST_F(ScriptModelTest, TiedTupleGptWithRecomputeMatchesPyTorch) {
  RunCase({"gpt12r",
           "gpt.pt",
           "tokens.bin",
           8,
           {{"embed", "embed", {0}}, {"block0", "head", {1, 2}}},
           "--recompute"},
          *dir_);
}

}  // namespace
}  // namespace dapple::testing
