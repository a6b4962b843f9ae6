// `dapple train` on models as people write them (Note [Layers from the graph] in
// models/graph_cut.h): torchvision's ResNet-18, MobileNetV2 and VGG-11 as shipped, a GPT with
// an nn.ModuleList loop and a tied head, a traced nanoGPT-style GPT whose forward computes its
// own loss, a U-Net with skip connections and a residual around children. Each is cut into
// stages (one with 2 replicas where there is no BatchNorm), trained, exported, and checked
// against PyTorch's own training of the same file on the same micro-batches
// (tests/torch/graph_models.py check: every micro-batch, and replica slice, run alone as the
// pipeline runs it, so that BatchNorm normalises the same samples).
#include <gtest/gtest.h>

#include "dist/script_models_dir.h"
#include "dist/train_test_util.h"

namespace dapple::testing {
namespace {

const char* kGraphModelsPython = DAPPLE_PYTHON;

struct GraphCase {
  std::string name, model, data;
  std::vector<StageSpec> stages;
  std::string schedule = "dapple-a";
  std::string loss = "cross-entropy";  // "own": forward(input, target) returns the loss
  std::string dtype = "float64";
  int seq_len = 0;
  int slices = 1;  // replica slices of a micro-batch (the widest stage's replicas)
  std::string extra;
  int virtual_stages = 1;  // > 1: `stages` lists the chunks of an interleaved plan
};

class GraphModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    graph_ = new fs::path(GraphModelsDir());
    script_ = new fs::path(ScriptModelsDir());
  }
  static fs::path* graph_;
  static fs::path* script_;
};
fs::path* GraphModelTest::graph_ = nullptr;
fs::path* GraphModelTest::script_ = nullptr;

// Trains `c` for `steps` steps of `M` micro-batches of `m` samples; checks the run against
// PyTorch. Returns the run's folder (checkpoints under ckpt/).
fs::path TrainAndCheck(const GraphCase& c, const fs::path& models, int m = 2, int M = 2,
                       int steps = 2) {
  fs::path dir = TestDir("graph_" + c.name);
  nlohmann::json j = nlohmann::json::parse(PlanJson(c.stages, m, M, c.schedule));
  if (c.virtual_stages > 1) j["virtual_stages"] = c.virtual_stages;
  fs::path plan = WritePlan(dir, "plan", j.dump(2));
  int nproc = 0;
  for (size_t k = 0; k < c.stages.size() / c.virtual_stages; ++k)
    nproc += static_cast<int>(c.stages[k].devices.size());
  const std::string model = (models / c.model).string(), exported = (dir / "out.pt").string();
  std::string flags = "train --model " + model + " --plan " + plan.string() + " --data " + c.data +
                      " --no-shuffle --dtype " + c.dtype + " --lr 0.05 --steps " +
                      std::to_string(steps) + " --nproc " + std::to_string(nproc) +
                      " --log-json --timeout-s 120 --checkpoint-dir " + (dir / "ckpt").string() +
                      " --save-model " + exported + " " + c.extra;
  if (c.loss != "own") flags += " --loss " + c.loss;
  if (c.seq_len > 0) flags += " --seq-len " + std::to_string(c.seq_len);
  RunResult r = RunDapple(flags, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.Losses().size() != static_cast<size_t>(steps)) {
    ADD_FAILURE() << "expected " << steps << " losses\n" << r.out << r.err;
    return dir;
  }
  const fs::path losses = WriteLosses(r, dir / "losses.txt");
  fs::path json = dir / "check.json";
  std::string cmd = std::string(kGraphModelsPython) + " " + DAPPLE_SOURCE_DIR +
                    "/tests/torch/graph_models.py check " + model + " " + c.data + " " + exported +
                    " " + losses.string() + " --steps " + std::to_string(steps) + " --gbs " +
                    std::to_string(m * M) + " --micro-batch " + std::to_string(m) + " --slices " +
                    std::to_string(c.slices) + " --seq-len " + std::to_string(c.seq_len) +
                    " --loss " + c.loss + " --dtype " + c.dtype + " > " + json.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  j = nlohmann::json::parse(Slurp(json), nullptr, false);
  if (!j.is_object()) {
    ADD_FAILURE() << "no check result: " << cmd;
    return dir;
  }
  const double tolerance = c.dtype == "float64" ? 1e-10 : 1e-4;
  EXPECT_EQ(j["steps"], steps);
  EXPECT_LT(j["max_loss_rel_diff"].get<double>(), tolerance) << j.dump();
  EXPECT_LT(j["max_param_rel_diff"].get<double>(), c.dtype == "float64" ? 1e-9 : 1e-3) << j.dump();
  EXPECT_TRUE(j["buffer_dtypes_kept"].get<bool>()) << j.dump();
  return dir;
}

// The layers come from the module hierarchy: ResNet-18's eight basic blocks are cut points,
// not one layer per top-level child (layer1..layer4).
TEST_F(GraphModelTest, ResNet18ProfileHasItsBasicBlocksAsLayers) {
  fs::path dir = TestDir("graph_profile");
  fs::path profile = dir / "profile.json";
  RunResult r = RunDapple("profile --model " + (*graph_ / "resnet18.pt").string() + " --data " +
                              (*graph_ / "images.pt").string() +
                              " --loss cross-entropy --batch 2 --batches 2 --repeat 1 "
                              "--warmup 0 --threads 1 -o " +
                              profile.string(),
                          dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> names;
  const nlohmann::json written = nlohmann::json::parse(Slurp(profile));
  for (const auto& l : written["layers"]) names.push_back(l["name"].get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"conv1", "bn1", "layer1.0", "layer1.1", "layer2.0",
                                             "layer2.1", "layer3.0", "layer3.1", "layer4.0",
                                             "layer4.1", "fc"}));
}

TEST_F(GraphModelTest, TorchvisionResNet18WithRecompute) {
  TrainAndCheck({"resnet18",
                 "resnet18.pt",
                 (*graph_ / "images.pt").string(),
                 {{"conv1", "layer2.1", {0}}, {"layer3.0", "fc", {1}}},
                 "dapple-a",
                 "cross-entropy",
                 "float64",
                 0,
                 1,
                 "--recompute",
                 1},
                *graph_);
}

TEST_F(GraphModelTest, TorchvisionMobileNetV2) {
  TrainAndCheck({"mobilenet",
                 "mobilenet_v2.pt",
                 (*graph_ / "images.pt").string(),
                 {{"features.0", "features.9", {0}}, {"features.10", "classifier.1", {1}}},
                 "dapple-a",
                 "cross-entropy",
                 "float64",
                 0,
                 1,
                 "",
                 1},
                *graph_);
}

// In float32: 129 M parameters (515 MB) in float64 would need 3 GB a process.
TEST_F(GraphModelTest, TorchvisionVgg11WithTwoReplicas) {
  TrainAndCheck({"vgg11",
                 "vgg11.pt",
                 (*graph_ / "images.pt").string(),
                 {{"features.0", "features.18", {0, 1}}, {"classifier.0", "classifier.6", {2}}},
                 "dapple-a",
                 "cross-entropy",
                 "float32",
                 0,
                 2,
                 "",
                 1},
                *graph_, 2, 2, 2);
}

// The tied head (head.weight is wte.weight) on the last stage, the embedding on the first.
TEST_F(GraphModelTest, ModuleListGptWithTiedHead) {
  TrainAndCheck({"loop_gpt",
                 "loop_gpt.pt",
                 (*script_ / "tokens.bin").string(),
                 {{"wte", "blocks.0", {0, 1}}, {"blocks.1", "head", {2}}},
                 "zb-h1",
                 "cross-entropy",
                 "float64",
                 8,
                 2,
                 "",
                 1},
                *graph_, 4, 4, 3);
}

// Interleaved 1F1B: two chunks per device; the encoders' outputs cross three chunk boundaries
// (and both devices twice) before the decoders concatenate them.
TEST_F(GraphModelTest, UNetInterleaved) {
  GraphCase c{"unet_v2",
              "unet.pt",
              (*graph_ / "unet_data.pt").string(),
              {{"enc1.0", "enc2.0", {0}},
               {"mid.0", "up2", {1}},
               {"dec2.0", "up1", {0}},
               {"dec1.0", "out", {1}}},
              "interleaved",
              "mse",
              "float64",
              0,
              1,
              "",
              2};
  TrainAndCheck(c, *graph_, 2, 4, 3);
}

// A parameter tied across the chunks of an interleaved plan is not run (Note [Tied
// parameters] across chunks in runtime/worker/chunk_set.cc): one line, before any rank starts.
TEST_F(GraphModelTest, TiedHeadAcrossChunksIsOneLine) {
  fs::path dir = TestDir("graph_tied_chunks");
  nlohmann::json j = nlohmann::json::parse(PlanJson({{"wte", "wpe", {0}},
                                                     {"blocks.0", "blocks.0", {1}},
                                                     {"blocks.1", "blocks.2", {0}},
                                                     {"ln_f", "head", {1}}},
                                                    2, 4, "interleaved"));
  j["virtual_stages"] = 2;
  fs::path plan = WritePlan(dir, "plan", j.dump(2));
  RunResult r =
      RunDapple("train --model " + (*graph_ / "loop_gpt.pt").string() + " --plan " + plan.string() +
                    " --data " + (*script_ / "tokens.bin").string() +
                    " --seq-len 8 --loss cross-entropy --steps 1 --nproc 2 --timeout-s 20",
                dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tied to layers of other chunks"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

// Traced, forward(idx, targets) -> (logits, loss): no --loss; the target goes to the last stage.
TEST_F(GraphModelTest, NanoGptWithItsOwnLoss) {
  TrainAndCheck({"nano_gpt",
                 "nano_gpt.pt",
                 (*script_ / "tokens.bin").string(),
                 {{"wte", "blocks.1", {0}}, {"blocks.2", "head", {1, 2}}},
                 "dapple-b",
                 "own",
                 "float64",
                 8,
                 2,
                 "",
                 1},
                *graph_, 4, 2, 3);
}

// The encoders' outputs cross the cut and are relayed to the decoders that concatenate them.
TEST_F(GraphModelTest, UNetSkipConnections) {
  TrainAndCheck({"unet",
                 "unet.pt",
                 (*graph_ / "unet_data.pt").string(),
                 {{"enc1.0", "enc2.0", {0, 1}}, {"mid.0", "dec2.0", {2}}, {"up1", "out", {3}}},
                 "dapple-a",
                 "mse",
                 "float64",
                 0,
                 2,
                 "",
                 1},
                *graph_, 4, 2, 3);
}

TEST_F(GraphModelTest, ResidualAroundChildren) {
  TrainAndCheck({"residual",
                 "residual_graph.pt",
                 (*graph_ / "residual_data.pt").string(),
                 {{"fc0", "fc1", {0}}, {"fc2", "head", {1, 2}}},
                 "gpipe",
                 "cross-entropy",
                 "float64",
                 0,
                 2,
                 "",
                 1},
                *graph_, 4, 2, 3);
}

}  // namespace
}  // namespace dapple::testing
