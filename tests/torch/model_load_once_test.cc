// A rank loads its model once (Note [Stage-local models]): a model loaded with no layer held
// and then given its held layers by MaterializeLayers equals a model loaded with those layers
// held from the start: the same layer names, parameters, buffers, tied parameters and forward,
// for a TorchScript file, a torch.export program and a zoo model; the layers not held have no
// module; materialising again, or a model loaded with layers, is refused.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dapple/common/error.h"
#include "dapple/models/model.h"
#include "dapple/models/model_source.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;

// tied.pt: a TorchScript token model whose head reuses the embedding matrix, with BatchNorm
// (buffers); two_inputs.pt2: a program exported from forward(x, mask), packed into one input
// (Note [Packed inputs]), with a tied head and BatchNorm too.
constexpr const char* kWriteModels = R"(
import sys, torch, torch.nn as nn
out = sys.argv[1]
torch.manual_seed(0)

class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.blocks = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.BatchNorm1d(6), nn.Linear(8, 8))
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, x):
        return self.head(self.norm(self.blocks(self.embed(x))))

class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
        self.bn = nn.BatchNorm1d(6)
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, x, mask):
        h = self.embed(x) * mask.unsqueeze(-1)
        for b in self.blocks:
            h = torch.relu(b(h))
        return self.head(self.bn(h))

class OwnLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 4)
        self.register_buffer("class_weight", torch.tensor([1.0, 2.0, 3.0, 4.0]))

    def forward(self, x, target):
        h = self.fc2(torch.relu(self.fc1(x)))
        return nn.functional.cross_entropy(h, target, weight=self.class_weight)

torch.jit.script(Tied().train()).save(out + "/tied.pt")
torch.jit.script(OwnLoss().train()).save(out + "/own_loss.pt")
batch = torch.export.Dim("batch")
args = (torch.randint(0, 16, (4, 6)), torch.ones(4, 6))
torch.export.save(torch.export.export(TwoInputs().train(), args,
                                      dynamic_shapes=({0: batch}, {0: batch})),
                  out + "/two_inputs.pt2")
)";

class ModelLoadOnce : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / fmt::format("dapple_load_once_{}", ::getpid());
    fs::create_directories(dir_);
    std::ofstream(dir_ / "write.py") << kWriteModels;
    const std::string cmd =
        fmt::format("{} {} {}", DAPPLE_PYTHON, (dir_ / "write.py").string(), dir_.string());
    written_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static ModelSource Script() {
    ModelSource s{(dir_ / "tied.pt").string(), {}, {}};
    s.script.loss = "cross-entropy";
    s.script.input_shape = {6};
    return s;
  }
  static ModelSource Exported() {
    ModelSource s{(dir_ / "two_inputs.pt2").string(), {}, {}};
    s.script.loss = "cross-entropy";
    return s;
  }
  static ModelSource Zoo() {
    return {"gpt",
            {{"hidden", "16"}, {"heads", "2"}, {"layers", "3"}, {"seq", "8"}, {"vocab", "30"}},
            {}};
  }

  static fs::path dir_;
  static bool written_;
};

fs::path ModelLoadOnce::dir_;
bool ModelLoadOnce::written_ = false;

// A batch of 4 samples the model takes.
torch::Tensor InputBatch(const Model& m) {
  torch::manual_seed(7);
  if (!m.input_parts.empty()) {
    std::vector<torch::Tensor> parts;
    for (const InputPart& p : m.input_parts) {
      std::vector<int64_t> shape{4};
      shape.insert(shape.end(), p.shape.begin(), p.shape.end());
      parts.push_back(c10::isFloatingType(p.dtype) ? torch::randint(0, 2, shape).to(p.dtype)
                                                   : torch::randint(0, 16, shape));
    }
    return PackInputs(parts, m.input_dtype);
  }
  std::vector<int64_t> shape{4};
  shape.insert(shape.end(), m.input_shape.begin(), m.input_shape.end());
  if (m.input_dtype == torch::kInt64) return torch::randint(0, m.vocab_size, shape);
  return torch::randn(shape, torch::dtype(m.input_dtype));
}

// The named tensors of a held layer: parameters, then buffers.
std::vector<std::pair<std::string, torch::Tensor>> NamedTensors(const NamedLayer& l) {
  std::vector<std::pair<std::string, torch::Tensor>> t;
  for (const auto& p : l.module->named_parameters()) t.push_back({"param " + p.key(), p.value()});
  for (const auto& b : l.module->named_buffers()) t.push_back({"buffer " + b.key(), b.value()});
  return t;
}

void ExpectSameLayers(const Model& got, const Model& want, const LayerRange& held) {
  const int n = want.num_layers();
  ASSERT_EQ(got.num_layers(), n);
  EXPECT_EQ(got.ParameterCount(), want.ParameterCount());
  for (int i = 0; i < n; ++i) {
    const NamedLayer &g = got.layers[i], &w = want.layers[i];
    EXPECT_EQ(g.name, w.name);
    ASSERT_EQ(w.held(), held.Contains(i, n)) << w.name;
    ASSERT_EQ(g.held(), w.held()) << g.name;
    if (!g.held()) {
      EXPECT_FALSE(g.forward) << g.name;
      continue;
    }
    auto gt = NamedTensors(g), wt = NamedTensors(w);
    ASSERT_EQ(gt.size(), wt.size()) << g.name;
    ASSERT_FALSE(gt.empty()) << g.name;
    for (size_t k = 0; k < gt.size(); ++k) {
      EXPECT_EQ(gt[k].first, wt[k].first) << g.name;
      EXPECT_EQ(gt[k].second.requires_grad(), wt[k].second.requires_grad()) << gt[k].first;
      EXPECT_TRUE(torch::equal(gt[k].second, wt[k].second)) << g.name << " " << gt[k].first;
    }
  }
  ASSERT_EQ(got.shared_parameters.size(), want.shared_parameters.size());
  for (size_t s = 0; s < got.shared_parameters.size(); ++s)
    EXPECT_EQ(got.shared_parameters[s].uses, want.shared_parameters[s].uses);
  EXPECT_EQ(got.input_shape, want.input_shape);
  EXPECT_EQ(got.input_dtype, want.input_dtype);
  EXPECT_EQ(got.target_shape, want.target_shape);
  EXPECT_EQ(got.target_dtype, want.target_dtype);
  EXPECT_EQ(got.num_classes, want.num_classes);
  EXPECT_EQ(got.vocab_size, want.vocab_size);
}

// Each run of held layers forwards the same batch (the whole model's activations at its
// start) to the same outputs, in training mode; a run that ends the model gives the same loss.
void ExpectSameForward(Model& got, Model& want, Model& whole, const LayerRange& held) {
  torch::NoGradGuard no_grad;
  const int n = want.num_layers();
  const torch::Tensor batch = InputBatch(whole);
  for (int a = 0; a < n; ++a) {
    if (!held.Contains(a, n) || (a > 0 && held.Contains(a - 1, n))) continue;
    int b = a;
    while (b + 1 < n && held.Contains(b + 1, n)) ++b;
    whole.SetTraining(false);
    const Activations in =
        a == 0 ? Activations{batch} : whole.ForwardActivations({batch}, 0, a - 1);
    const Activations g = got.ForwardActivations(in, a, b), w = want.ForwardActivations(in, a, b);
    ASSERT_EQ(g.size(), w.size());
    for (size_t k = 0; k < g.size(); ++k)
      EXPECT_TRUE(torch::equal(g[k], w[k])) << "layers " << a << ".." << b << " output " << k;
    if (b == n - 1) {
      const torch::Tensor target = torch::randint(0, want.num_classes, g[0].sizes().slice(0, 2));
      EXPECT_TRUE(torch::equal(got.loss(g[0], target), want.loss(w[0], target)));
    }
  }
}

void ExpectTwoPhasesEqualOne(const ModelSource& source) {
  Model whole = LoadModel(source, /*seed=*/5, torch::kFloat32);
  const int n = whole.num_layers();
  ASSERT_GE(n, 5) << source.model;
  EXPECT_FALSE(whole.materialize_layers);  // loaded with layers: nothing to materialise later
  // A stage; two chunks of an interleaved plan; the last stage (the loss); an idle rank.
  for (const LayerRange& held :
       {LayerRange{0, 1, {}}, LayerRange{0, 0, {{2, 3}}}, LayerRange{3, -1, {}}, kNoLayers}) {
    SCOPED_TRACE(fmt::format("{}: held [{}, {}] and {} more", source.model, held.first, held.last,
                             held.more.size()));
    Model direct = LoadModel(source, 5, torch::kFloat32, held);
    Model once = LoadModel(source, 5, torch::kFloat32, kNoLayers);
    ASSERT_TRUE(once.materialize_layers);
    for (const auto& l : once.layers) EXPECT_FALSE(l.held()) << l.name;
    const int loads = ModelLoads();
    MaterializeLayers(once, held);
    EXPECT_EQ(ModelLoads(), loads);
    EXPECT_FALSE(once.materialize_layers);
    ExpectSameLayers(once, direct, held);
    ExpectSameForward(once, direct, whole, held);
    // Twice is a bug of the caller, as is a model loaded with its layers.
    EXPECT_THROW(MaterializeLayers(once, held), Error);
    EXPECT_THROW(MaterializeLayers(whole, held), Error);
  }
}

TEST_F(ModelLoadOnce, TorchScriptMaterialisedLaterEqualsLoadedHeld) {
  ASSERT_TRUE(written_);
  ExpectTwoPhasesEqualOne(Script());
  // The tied head: one tensor in the layers of both uses.
  Model m = LoadModel(Script(), 5, torch::kFloat32, kNoLayers);
  ASSERT_EQ(m.shared_parameters.size(), 1u);
}

TEST_F(ModelLoadOnce, ExportedProgramMaterialisedLaterEqualsLoadedHeld) {
  ASSERT_TRUE(written_);
  ExpectTwoPhasesEqualOne(Exported());
  Model m = LoadModel(Exported(), 5, torch::kFloat32, kNoLayers);
  EXPECT_EQ(m.input_parts.size(), 2u);
  EXPECT_EQ(m.shared_parameters.size(), 1u);
}

// A loss computed in forward that reads a buffer (class weights) keeps it, whichever layers
// the process holds: the tensors no held layer reads are freed, the loss's are not.
TEST_F(ModelLoadOnce, AForwardsOwnLossKeepsTheTensorsItReads) {
  ASSERT_TRUE(written_);
  ModelSource s{(dir_ / "own_loss.pt").string(), {}, {}};
  s.script.input_shape = {6};
  const torch::Tensor output = torch::randn({5, 4}), target = torch::tensor({0, 1, 2, 3, 3});
  const torch::Tensor want = torch::nn::functional::cross_entropy(
      output, target,
      torch::nn::functional::CrossEntropyFuncOptions().weight(torch::tensor({1.f, 2.f, 3.f, 4.f})));
  for (const LayerRange& held : {LayerRange{1, 1, {}}, LayerRange{0, 0, {}}, LayerRange{}}) {
    Model m = LoadModel(s, 5, torch::kFloat32, held);
    EXPECT_TRUE(torch::allclose(m.loss(output, target), want)) << held.first << ".." << held.last;
  }
  Model later = LoadModel(s, 5, torch::kFloat32, kNoLayers);
  MaterializeLayers(later, LayerRange{1, 1, {}});
  EXPECT_TRUE(torch::allclose(later.loss(output, target), want));
}

TEST_F(ModelLoadOnce, ZooModelMaterialisedLaterEqualsLoadedHeld) { ExpectTwoPhasesEqualOne(Zoo()); }

}  // namespace
}  // namespace dapple
