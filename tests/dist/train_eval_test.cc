// `dapple train --eval` without a checkpoint folder: the held-out loss, accuracy and (for a
// language model) perplexity of the trained stages, run through a 2-stage pipeline, equal a
// single-process evaluation of the same weights (read from a second, identical run's
// checkpoint), for Fashion-MNIST and for the KJV text.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "dapple/models/data.h"
#include "dapple/models/model.h"
#include "dapple/runtime/checkpoint/checkpoint.h"
#include "dist/train_test_util.h"

namespace dapple::testing {
namespace {

struct EvalReference {
  double loss = 0, accuracy = 0;
  int64_t samples = 0;
};

// Loads every layer of `model` from the checkpoint after `steps` steps in `dir` and evaluates
// the first `n` held-out samples of `data` in one process: the mean loss and the fraction of
// argmax predictions (per sample or per token) equal to the targets.
EvalReference Evaluate(Model& model, const fs::path& dir, int64_t steps, const std::string& data,
                       int64_t n, const fs::path& cache) {
  for (auto& l : model.layers) {
    LoadLayer(CheckpointStepDir(dir, steps), l.name, *l.module, /*states=*/nullptr);
    l.module->eval();
  }
  Batch test = MakeDataset(data, model, 0, cache)->TestSet();
  torch::NoGradGuard no_grad;
  torch::Tensor x = test.inputs.narrow(0, 0, n), y = test.targets.narrow(0, 0, n);
  torch::Tensor out = model.Forward(x);
  EvalReference r;
  r.samples = n;
  r.loss = model.loss(out, y).item<double>();
  r.accuracy = out.argmax(-1).eq(y).to(torch::kFloat64).mean().item<double>();
  return r;
}

// Trains `flags` on a 2-stage plan twice (with --eval and no checkpoint folder; without
// --eval and with one) and checks the first run's evaluation against the second's weights.
void CheckEvaluation(const std::string& name, const std::string& model_name,
                     const ModelOptions& options, const std::string& data,
                     const std::vector<std::string>& layers, int cut, int64_t n,
                     bool language_model) {
  std::string flags = "--model " + model_name;
  for (const auto& [k, v] : options) flags += " --opt " + k + "=" + v;
  fs::path dir = TestDir(name), cache = dir / "cache";
  fs::path plan = WritePlan(
      dir, "plan",
      PlanJson({{layers.front(), layers[cut], {0}}, {layers[cut + 1], layers.back(), {1}}}, 4, 2,
               "dapple-a"));
  const std::string common =
      fmt::format("train {} --plan {} --nproc 2 --steps 6 --data {} --data-cache-dir {} --log-json",
                  flags, plan.string(), data, cache.string());
  RunResult evaluated = RunDapple(fmt::format("{} --eval --eval-samples {}", common, n), dir);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
  fs::path ckpt = dir / "ckpt";
  RunResult saved = RunDapple(common + " --checkpoint-dir " + ckpt.string(), dir);
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_TRUE(saved.Eval().is_null()) << "no --eval, no evaluation";

  nlohmann::json e = evaluated.Eval();
  ASSERT_TRUE(e.is_object()) << evaluated.out;
  EXPECT_EQ(e["data"], data);
  EXPECT_EQ(e["test_samples"].get<int64_t>(), n);
  Model model = BuildModel(model_name, options, 0);
  EvalReference ref = Evaluate(model, ckpt, 6, data, n, cache);
  EXPECT_NEAR(e["loss"].get<double>(), ref.loss, 1e-5 * std::max(1.0, ref.loss));
  EXPECT_NEAR(e["accuracy"].get<double>(), ref.accuracy, 1e-9);
  if (language_model) {
    ASSERT_TRUE(e.contains("perplexity"));
    EXPECT_NEAR(e["perplexity"].get<double>(), std::exp(ref.loss), 1e-4 * std::exp(ref.loss));
  } else {
    EXPECT_FALSE(e.contains("perplexity"));
  }
}

TEST(TrainEval, FashionMnistWithoutACheckpointFolder) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  CheckEvaluation("fashion", "mlp",
                  {{"input", "784"}, {"hidden", "32"}, {"layers", "2"}, {"classes", "10"}},
                  "fashion-mnist", {"fc0", "fc1", "head"}, 0, 600, false);
}

TEST(TrainEval, KjvLanguageModelHasPerplexity) {
  if (!fs::exists("/usr/bin/bible")) GTEST_SKIP() << "bible-kjv not installed";
  CheckEvaluation("kjv", "gpt", {{"hidden", "32"}, {"heads", "2"}, {"layers", "2"}, {"seq", "32"}},
                  "kjv", {"embed", "block0", "block1", "head"}, 1, 300, true);
}

}  // namespace
}  // namespace dapple::testing
