// `dapple train` on programs saved by torch.export (Note [Exported programs run through the
// dispatcher] in models/exported_program.h, Note [Layers from module paths] in
// models/export_cut.h): the MLP of the TorchScript tests, the ModuleList GPT with SDPA
// attention, a tied head and forward(idx, targets) computing its own loss, and a
// convolution with BatchNorm and a residual, each exported in training mode with a dynamic
// batch dimension, cut into 2 stages, trained for 5 steps in float64 and checked against
// PyTorch's own training of the Python module (tests/torch/export_models.py check): every
// step's loss, and the final parameters and buffers read back through the state_dict that
// --save-model writes. Bad programs are one line with exit code 2.
#include <gtest/gtest.h>

#include "dist/script_models_dir.h"
#include "dist/train_test_util.h"

namespace dapple::testing {
namespace {

fs::path ExportModelsDir() {
  return WrittenModelsDir("export_models.py",
                          {"tests/torch/script_models.py", "tests/torch/graph_models.py",
                           "examples/gpt_kjv.py", "examples/gpt_modulelist_kjv.py"});
}

struct ExportCase {
  std::string name, model, data;
  std::vector<StageSpec> stages;
  std::string loss = "cross-entropy";  // "own": forward(input, target) returns the loss
  int seq_len = 0;
  int slices = 1;          // replica slices of a micro-batch (the widest stage's replicas)
  std::string extra = {};  // more flags for dapple train
  bool program = false;    // also `dapple export -o trained.pt2`, checked with torch.export.load
  std::string dtype = "float64";
  double loss_limit = 1e-10, state_limit = 1e-9;  // relative, against PyTorch
  std::string eval_data = {};  // also --eval on this file, against PyTorch's eval()
};

class ExportedModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new fs::path(ExportModelsDir()); }
  static fs::path* dir_;
};
fs::path* ExportedModelTest::dir_ = nullptr;

// Trains `c` for 5 steps of 2 micro-batches of 4 samples and checks it against PyTorch.
void TrainExportedAndCheck(const ExportCase& c, const fs::path& models) {
  const int steps = 5, m = 4, M = 2;
  fs::path dir = TestDir("export_" + c.name);
  fs::path plan = WritePlan(dir, "plan", PlanJson(c.stages, m, M, "dapple-a"));
  int nproc = 0;
  for (const auto& s : c.stages) nproc += static_cast<int>(s.devices.size());
  const std::string model = (models / c.model).string(), state = (dir / "state.pt").string();
  const std::string data = (models / c.data).string();
  std::string flags = "train --model " + model + " --plan " + plan.string() + " --data " + data +
                      " --no-shuffle --dtype " + c.dtype + " --lr 0.05 --steps " +
                      std::to_string(steps) + " --nproc " + std::to_string(nproc) +
                      " --log-json --timeout-s 120 --save-model " + state + " --checkpoint-dir " +
                      (dir / "ckpt").string();
  if (c.loss != "own") flags += " --loss " + c.loss;
  if (c.seq_len > 0) flags += " --seq-len " + std::to_string(c.seq_len);
  if (!c.eval_data.empty()) flags += " --eval --eval-data " + (models / c.eval_data).string();
  flags += " " + c.extra;
  RunResult r = RunDapple(flags, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.Losses().size(), static_cast<size_t>(steps)) << r.out << r.err;
  const fs::path losses = WriteLosses(r, dir / "losses.txt");
  const std::string program = (dir / "trained.pt2").string();
  if (c.program) {
    RunResult e = RunDapple(
        "export --model " + model + " --checkpoint " + (dir / "ckpt").string() + " -o " + program,
        dir);
    ASSERT_EQ(e.exit_code, 0) << e.err;
  }
  const fs::path json = dir / "check.json";
  std::string cmd = std::string(DAPPLE_PYTHON) + " " + DAPPLE_SOURCE_DIR +
                    "/tests/torch/export_models.py check " + model + " " + data + " " + state +
                    " " + losses.string() + " --steps " + std::to_string(steps) + " --gbs " +
                    std::to_string(m * M) + " --micro-batch " + std::to_string(m) + " --slices " +
                    std::to_string(c.slices) + " --seq-len " + std::to_string(c.seq_len) +
                    " --loss " + c.loss + " --dtype " + c.dtype +
                    (c.program ? " --program " + program : "") +
                    (c.eval_data.empty() ? "" : " --eval-data " + (models / c.eval_data).string()) +
                    " > " + json.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  nlohmann::json j = nlohmann::json::parse(Slurp(json), nullptr, false);
  ASSERT_TRUE(j.is_object()) << cmd;
  EXPECT_EQ(j["steps"], steps);
  EXPECT_LT(j["max_loss_rel_diff"].get<double>(), c.loss_limit) << j.dump();
  EXPECT_LT(j["max_state_rel_diff"].get<double>(), c.state_limit) << j.dump();
  if (!c.eval_data.empty()) {  // the held-out loss and accuracy of the trained model
    const nlohmann::json e = r.Eval();
    ASSERT_TRUE(e.is_object()) << r.out;
    EXPECT_NEAR(e["loss"].get<double>(), j["eval_loss"].get<double>(),
                1e-9 * j["eval_loss"].get<double>())
        << j.dump();
    EXPECT_NEAR(e["accuracy"].get<double>(), j["eval_accuracy"].get<double>(), 1e-12) << j.dump();
  }
  if (c.program) {  // float32 records of float64 training
    EXPECT_LT(j["max_program_rel_diff"].get<double>(), 1e-6) << j.dump();
    EXPECT_TRUE(j["program_runs"].get<bool>()) << j.dump();
  }
}

// The MLP with 2 replicas on its first stage.
ExportCase MlpCase() {
  return {"mlp",
          "mlp.pt2",
          "mlp_data.pt",
          {{"fc0", "fc1", {0, 1}}, {"fc2", "head", {2}}},
          "cross-entropy",
          0,
          2};
}

TEST_F(ExportedModelTest, MlpWithTwoReplicasOnItsFirstStage) {
  TrainExportedAndCheck(MlpCase(), *dir_);
}

// The tied head (head.weight shares wte.weight's record) on the second stage, the embedding
// on the first; the batch size each block reshapes with is read again on the second stage.
// The trained program goes back as a .pt2 too (Note [A program back]).
TEST_F(ExportedModelTest, NanoGptComputingItsOwnLoss) {
  TrainExportedAndCheck({"nano_gpt",
                         "nano_gpt.pt2",
                         "tokens.bin",
                         {{"wte", "blocks.0", {0, 1}}, {"blocks.1", "head", {2}}},
                         "own",
                         8,
                         2,
                         "",
                         true},
                        *dir_);
}

// BatchNorm's running statistics are buffers the graph updates in place; the residual around
// conv2 crosses the cut.
TEST_F(ExportedModelTest, BatchNormAndResidual) {
  TrainExportedAndCheck({"bn",
                         "bn.pt2",
                         "bn_data.pt",
                         {{"conv", "bn", {0}}, {"conv2", "fc", {1}}},
                         "cross-entropy",
                         0,
                         1,
                         "",
                         false,
                         "float64",
                         1e-10,
                         1e-9,
                         "bn_data.pt"},
                        *dir_);
}

TEST_F(ExportedModelTest, ProfileListsTheUnits) {
  fs::path dir = TestDir("export_profile");
  fs::path profile = dir / "profile.json";
  RunResult r = RunDapple("profile --model " + (*dir_ / "nano_gpt.pt2").string() + " --data " +
                              (*dir_ / "tokens.bin").string() +
                              " --seq-len 8 --batch 2 --batches 1,2,3 --repeat 1 --warmup 0 "
                              "--threads 1 -o " +
                              profile.string(),
                          dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> names;
  const nlohmann::json written = nlohmann::json::parse(Slurp(profile));
  for (const auto& l : written["layers"]) names.push_back(l["name"].get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"wte", "wpe", "blocks.0", "blocks.1", "blocks.2",
                                             "ln_f", "head"}));
}

// Hugging Face's GPT2LMHeadModel as users export it (keyword inputs input_ids and labels, a
// dataclass output whose loss is trained), cut at depth 2: its blocks are layers, and the
// head tied to transformer.wte is on the other stage.
TEST_F(ExportedModelTest, HuggingFaceGpt2AtDepthTwo) {
  TrainExportedAndCheck(
      {"gpt2",
       "gpt2.pt2",
       "tokens.bin",
       {{"transformer.wte", "transformer.h.0", {0, 1}}, {"transformer.h.1", "lm_head", {2}}},
       "own",
       8,
       2,
       "--layer-depth 2"},
      *dir_);
}

// Hugging Face's BertForSequenceClassification as users export it: forward(input_ids=,
// attention_mask=, labels=), the padding masked; the mask comes from the data file by name
// (Note [Packed inputs] in models/model.h) and the attention mask made from it crosses the cut.
TEST_F(ExportedModelTest, HuggingFaceBertWithAttentionMask) {
  TrainExportedAndCheck({"bert",
                         "bert.pt2",
                         "bert_data.pt",
                         {{"bert.embeddings.word_embeddings", "bert.encoder.layer.0", {0, 1}},
                          {"bert.encoder.layer.1", "classifier", {2}}},
                         "own",
                         0,
                         2,
                         "--layer-depth 3"},
                        *dir_);
}

TEST_F(ExportedModelTest, DataWithoutAnInputIsOneLine) {
  fs::path dir = TestDir("export_bert_nomask");
  fs::path plan = WritePlan(
      dir, "plan",
      PlanJson({{"bert.embeddings.word_embeddings", "classifier", {0}}}, 4, 2, "dapple-a"));
  RunResult r = RunDapple("train --model " + (*dir_ / "bert.pt2").string() + " --data " +
                              (*dir_ / "bert_nomask.pt").string() + " --plan " + plan.string() +
                              " --layer-depth 3 --steps 1 --nproc 1",
                          dir);
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneErrorLine(r, {"bert_nomask.pt", "'attention_mask'", "input attention_mask"});
}

// timm's models as created (random initialisation, 10 classes, 32x32 images).
TEST_F(ExportedModelTest, TimmResnet18) {
  TrainExportedAndCheck({"resnet18",
                         "resnet18.pt2",
                         "image_data.pt",
                         {{"conv1", "layer2.1", {0}}, {"layer3.0", "fc", {1}}},
                         "cross-entropy",
                         0,
                         1,
                         ""},
                        *dir_);
}

TEST_F(ExportedModelTest, TimmVisionTransformer) {
  TrainExportedAndCheck({"vit",
                         "vit.pt2",
                         "image_data.pt",
                         {{"patch_embed", "blocks.0", {0, 1}}, {"blocks.1", "head", {2}}},
                         "cross-entropy",
                         0,
                         2,
                         ""},
                        *dir_);
}

// float32 training against PyTorch's in float32.
TEST_F(ExportedModelTest, MlpAndGpt2InFloat32) {
  ExportCase mlp = MlpCase();
  mlp.name = "mlp_float32";
  mlp.dtype = "float32";
  mlp.loss_limit = mlp.state_limit = 1e-4;
  TrainExportedAndCheck(mlp, *dir_);
  TrainExportedAndCheck(
      {"gpt2_float32",
       "gpt2.pt2",
       "tokens.bin",
       {{"transformer.wte", "transformer.h.0", {0}}, {"transformer.h.1", "lm_head", {1}}},
       "own",
       8,
       1,
       "--layer-depth 2",
       false,
       "float32",
       1e-4,
       1e-4},
      *dir_);
}

// The profile's layer names and `dapple train`'s losses of one module through both doors: a
// program saved by torch.export (.pt2) and a TorchScript file (.pt) of the same weights.
void ExpectBothDoorsAlike(const std::string& name, const std::string& data,
                          const std::string& flags, const std::vector<StageSpec>& stages,
                          const fs::path& models) {
  fs::path dir = TestDir("export_doors_" + name);
  fs::path plan = WritePlan(dir, "plan", PlanJson(stages, 4, 2, "dapple-a"));
  std::vector<std::vector<std::string>> names;
  std::vector<std::vector<double>> losses;
  for (const std::string& file : {name + ".pt2", name + "_twin.pt"}) {
    const std::string common = " --model " + (models / file).string() + " --data " +
                               (models / data).string() + " " + flags;
    const fs::path profile = dir / (file + ".json");
    RunResult p = RunDapple("profile" + common +
                                " --batch 2 --batches 1,2 --repeat 1 --warmup 0 --threads 1 -o " +
                                profile.string(),
                            dir);
    ASSERT_EQ(p.exit_code, 0) << p.err;
    names.emplace_back();
    for (const auto& l : nlohmann::json::parse(Slurp(profile))["layers"])
      names.back().push_back(l["name"].get<std::string>());
    RunResult t = RunDapple("train" + common + " --plan " + plan.string() +
                                " --no-shuffle --dtype float64 --lr 0.05 --steps 5 --nproc 3 "
                                "--log-json --timeout-s 120",
                            dir);
    ASSERT_EQ(t.exit_code, 0) << t.err;
    losses.push_back(t.Losses());
  }
  EXPECT_EQ(names[0], names[1]);
  ASSERT_EQ(losses[0].size(), 5u);
  ASSERT_EQ(losses[1].size(), 5u);
  for (size_t i = 0; i < losses[0].size(); ++i)
    EXPECT_NEAR(losses[0][i], losses[1][i], 1e-10 * std::abs(losses[1][i])) << "step " << i;
}

TEST_F(ExportedModelTest, BothDoorsGiveTheSameLayersAndLosses) {
  ExpectBothDoorsAlike("mlp", "mlp_data.pt", "--loss cross-entropy",
                       {{"fc0", "fc1", {0, 1}}, {"fc2", "head", {2}}}, *dir_);
  ExpectBothDoorsAlike("nano_gpt", "tokens.bin", "--seq-len 8",
                       {{"wte", "blocks.0", {0, 1}}, {"blocks.1", "head", {2}}}, *dir_);
}

TEST_F(ExportedModelTest, EvalModeExportIsOneLine) {
  fs::path dir = TestDir("export_eval");
  RunResult r = RunDapple("profile --model " + (*dir_ / "eval.pt2").string() + " --data " +
                              (*dir_ / "bn_data.pt").string() +
                              " --loss cross-entropy --batch 2 -o " + (dir / "p.json").string(),
                          dir);
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneErrorLine(r, {"eval.pt2", "evaluation mode", "model.train()"});
}

TEST_F(ExportedModelTest, UnknownOperatorIsOneLine) {
  fs::path dir = TestDir("export_custom_op");
  RunResult r = RunDapple("profile --model " + (*dir_ / "custom_op.pt2").string() + " --data " +
                              (*dir_ / "mlp_data.pt").string() +
                              " --loss cross-entropy --batch 2 -o " + (dir / "p.json").string(),
                          dir);
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneErrorLine(r, {"custom_op.pt2", "dapple_test.twice", "not an ATen operator"});
}

}  // namespace
}  // namespace dapple::testing
