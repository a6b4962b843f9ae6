// What `dapple train` does with data that poisons training, and what its output promises: a
// NaN sample stops the job at its step before that step's checkpoint (Note [Non-finite
// losses] in runtime/train/step_losses.cc), and the newest checkpoint still exports; with
// --log-json stdout holds only JSON lines, and the held-out line names the file it evaluated.
#include <gtest/gtest.h>

#include "dist/script_models_dir.h"
#include "dist/train_test_util.h"

namespace dapple::testing {
namespace {

class NonFiniteTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { models_ = new fs::path(ScriptModelsDir()); }
  static std::string F(const std::string& name) { return (*models_ / name).string(); }
  static fs::path* models_;
};
fs::path* NonFiniteTest::models_ = nullptr;

// mlp_data.pt with sample `row` made NaN, written to `dir`.
fs::path DataWithNan(const fs::path& models, const fs::path& dir, int row) {
  fs::path out = dir / "nan_data.pt";
  std::string cmd = std::string(DAPPLE_PYTHON) + " -c \"import torch; d = torch.load('" +
                    (models / "mlp_data.pt").string() + "'); d['input'][" + std::to_string(row) +
                    "] = float('nan'); torch.save(d, '" + out.string() + "')\"";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return out;
}

TEST_F(NonFiniteTest, NanSampleStopsAtItsStepAndTheCheckpointBeforeExports) {
  fs::path dir = TestDir("nan_stop");
  fs::path data = DataWithNan(*models_, dir, 9);  // global batch 1 of 8 samples: step 2
  fs::path plan = WritePlan(
      dir, "plan", PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 4, 2, "dapple-a"));
  RunResult r = RunDapple("train --model " + F("mlp.pt") + " --plan " + plan.string() + " --data " +
                              data.string() +
                              " --loss cross-entropy --no-shuffle --steps 4 --nproc 2 "
                              "--timeout-s 30 --checkpoint-every 1 --checkpoint-dir " +
                              (dir / "ckpt").string(),
                          dir);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  std::vector<std::string> errors;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);)
    if (line.find("error") != std::string::npos) errors.push_back(line);
  ASSERT_EQ(errors.size(), 1u) << r.err;
  EXPECT_NE(errors[0].find("step 2: the loss is nan"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("samples 8..15"), std::string::npos) << errors[0];
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "step-1"));
  EXPECT_FALSE(fs::exists(dir / "ckpt" / "step-2")) << "a checkpoint of the NaN step was written";

  RunResult e = RunDapple("export --model " + F("mlp.pt") + " --checkpoint " +
                              (dir / "ckpt").string() + " -o " + (dir / "out.pt").string(),
                          dir);
  EXPECT_EQ(e.exit_code, 0) << e.out << e.err;
  EXPECT_TRUE(fs::exists(dir / "out.pt"));
}

TEST_F(NonFiniteTest, LogJsonStdoutIsOnlyJsonAndEvalNamesItsFile) {
  fs::path dir = TestDir("json_only");
  fs::path plan = WritePlan(dir, "plan", PlanJson({{"fc0", "head", {0}}}, 4, 2, "dapple-a"));
  fs::path eval = dir / "eval_data.pt";
  fs::copy_file(*models_ / "mlp_data.pt", eval);
  RunResult r = RunDapple("train --model " + F("mlp.pt") + " --plan " + plan.string() + " --data " +
                              F("mlp_data.pt") + " --eval-data " + eval.string() +
                              " --eval --loss cross-entropy --steps 2 --log-json --timeout-s 30 "
                              "--save-model " +
                              (dir / "out.pt").string(),
                          dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON on stdout: " << line;
  }
  EXPECT_GE(count, 4);
  ASSERT_TRUE(r.Eval().is_object()) << r.out;
  EXPECT_EQ(r.Eval()["data"], eval.string());
}

}  // namespace
}  // namespace dapple::testing
