// Bad input for users' TorchScript models and data files: each gives exit code 2 and one
// line naming the file and what is wrong, before any training step (docs/your-model.md).
#include <gtest/gtest.h>

#include "dist/script_models_dir.h"
#include "dist/train_test_util.h"

namespace dapple::testing {
namespace {

class ScriptModelErrorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new fs::path(ScriptModelsDir());
    plans_ = new fs::path(TestDir("script_error_plans"));
    WritePlan(*plans_, "mlp_plan", PlanJson({{"fc0", "head", {0}}}, 4, 2, "dapple-a"));
    WritePlan(*plans_, "gpt_plan", PlanJson({{"embed", "head", {0}}}, 4, 2, "dapple-a"));
    WritePlan(*plans_, "wrong_plan", PlanJson({{"fc0", "fc9", {0}}}, 4, 2, "dapple-a"));
  }
  // A model or data file of script_models.py; a plan written above.
  static std::string F(const std::string& name) { return (*models_ / name).string(); }
  static std::string P(const std::string& name) { return (*plans_ / name).string(); }

  // Runs `dapple train` on one process; returns the result.
  RunResult Train(const std::string& model, const std::string& data, const std::string& plan,
                  const std::string& extra = "") {
    fs::path dir = TestDir("script_error_run");
    return RunDapple("train --model " + F(model) + " --plan " + P(plan) + " --data " + F(data) +
                         " --loss cross-entropy --steps 1 --timeout-s 20 " + extra,
                     dir);
  }
  // Exit 2 and one line on stderr holding every one of `words`.
  static void ExpectOneLine(const RunResult& r, const std::vector<std::string>& words) {
    ExpectOneErrorLine(r, words);
  }
  static fs::path* models_;
  static fs::path* plans_;
};
fs::path* ScriptModelErrorTest::models_ = nullptr;
fs::path* ScriptModelErrorTest::plans_ = nullptr;

TEST_F(ScriptModelErrorTest, StateDictIsNotTorchScript) {
  ExpectOneLine(Train("state_dict.pt", "mlp_data.pt", "mlp_plan.json"),
                {"state_dict.pt", "not a TorchScript archive"});
}

TEST_F(ScriptModelErrorTest, LegacySaveIsNotTorchScript) {
  ExpectOneLine(Train("legacy.pt", "mlp_data.pt", "mlp_plan.json"),
                {"legacy.pt", "not a TorchScript archive"});
}

TEST_F(ScriptModelErrorTest, DictOutputIsRefused) {
  ExpectOneLine(Train("dict.pt", "mlp_data.pt", "mlp_plan.json"),
                {"dict.pt", "forward returns a Dict", "must return a tensor"});
}

TEST_F(ScriptModelErrorTest, DataOfTheWrongShape) {
  ExpectOneLine(Train("mlp.pt", "mlp_badshape.pt", "mlp_plan.json"),
                {"mlp.pt", "layer fc0 fails on a batch of samples shaped [5]"});
}

TEST_F(ScriptModelErrorTest, ClassTargetsOutsideTheHead) {
  ExpectOneLine(Train("mlp.pt", "mlp_badclass.pt", "mlp_plan.json"),
                {"mlp_badclass.pt", "'target' holds class 7", "4 classes"});
}

TEST_F(ScriptModelErrorTest, TokenFileOfOddSize) {
  ExpectOneLine(Train("gpt.pt", "tokens_odd.bin", "gpt_plan.json", "--seq-len 8"),
                {"tokens_odd.bin", "not a whole number of uint16 tokens"});
}

TEST_F(ScriptModelErrorTest, TokenIdsBeyondTheEmbedding) {
  ExpectOneLine(Train("gpt.pt", "tokens_big.bin", "gpt_plan.json", "--seq-len 8"),
                {"tokens_big.bin", "token 40", "vocabulary of 16"});
}

TEST_F(ScriptModelErrorTest, LearningRateNotANumber) {
  ExpectOneLine(Train("mlp.pt", "mlp_data.pt", "mlp_plan.json", "--lr nan"),
                {"--lr nan", "expected a number above 0"});
}

TEST_F(ScriptModelErrorTest, MomentumOutOfRange) {
  ExpectOneLine(Train("mlp.pt", "mlp_data.pt", "mlp_plan.json", "--momentum 1.5"),
                {"--momentum 1.5", "[0, 1)"});
}

TEST_F(ScriptModelErrorTest, PlanLayersAreNotTheChildren) {
  ExpectOneLine(Train("mlp.pt", "mlp_data.pt", "wrong_plan.json"), {"wrong_plan.json", "'fc9'"});
}

// Through the launcher (--nproc): still one line, and no rank starts.
TEST_F(ScriptModelErrorTest, LauncherChecksTheDataFile) {
  ExpectOneLine(Train("mlp.pt", "mlp_badclass.pt", "mlp_plan.json", "--nproc 1"),
                {"mlp_badclass.pt", "'target' holds class"});
}

// The held-out file as well, read without its inputs' values (CheckDataFile).
TEST_F(ScriptModelErrorTest, LauncherChecksTheHeldOutFile) {
  ExpectOneLine(Train("mlp.pt", "mlp_data.pt", "mlp_plan.json",
                      "--nproc 1 --eval --eval-data " + F("mlp_badclass.pt")),
                {"mlp_badclass.pt", "'target' holds class"});
}

}  // namespace
}  // namespace dapple::testing
