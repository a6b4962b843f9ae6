// The zoo's layer lists: running them layer by layer (as pipeline stages do, each layer on
// a detached input) gives the output and gradients of running the model whole; builds are
// deterministic; counted parameters match built ones; options are checked.
#include <gtest/gtest.h>
#include <torch/autograd.h>
#include <torch/nn/module.h>
#include <torch/optim/adam.h>

#include <map>
#include <set>

#include "dapple/common/error.h"
#include "dapple/models/data.h"
#include "dapple/models/model.h"
#include "dapple/models/zoo.h"

namespace dapple {
namespace {

// Small configurations of every model: a few seconds in all on 2 cores.
ModelOptions Small(const std::string& name) {
  if (name == "mlp") return {{"input", "12"}, {"hidden", "16"}, {"layers", "3"}, {"classes", "5"}};
  if (name == "vgg19") return {{"width", "0.0625"}, {"image", "32"}, {"fc", "32"}};
  if (name == "resnet50") return {{"width", "0.125"}, {"image", "32"}};
  if (name == "bert")
    return {{"hidden", "16"}, {"heads", "2"}, {"layers", "2"}, {"seq", "8"}, {"vocab", "50"}};
  if (name == "gpt")
    return {{"hidden", "16"}, {"heads", "2"}, {"layers", "2"}, {"seq", "8"}, {"vocab", "30"}};
  return {};
}

Batch SomeBatch(const Model& m, int64_t n) {
  return MakeDataset("synthetic", m, /*seed=*/7, "")->GlobalBatch(0, n);
}

std::vector<torch::Tensor> Grads(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> g;
  for (const auto& p : params) g.push_back(p.grad().defined() ? p.grad().clone() : p * 0);
  return g;
}

void ZeroGrads(const Model& m) {
  for (auto& p : m.Parameters(0, m.num_layers() - 1))
    if (p.grad().defined()) p.mutable_grad().zero_();
}

class EveryModel : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryModel, LayerByLayerEqualsWhole) {
  Model m = BuildModel(GetParam(), Small(GetParam()), 1, torch::kFloat64);
  ASSERT_GE(m.num_layers(), 2);
  Batch b = SomeBatch(m, 4);
  auto params = m.Parameters(0, m.num_layers() - 1);

  torch::Tensor whole = m.Forward(b.inputs);
  m.loss(whole, b.targets).backward();
  auto whole_grads = Grads(params);
  ZeroGrads(m);

  // Pipeline style: every layer on a detached copy of its input, gradients passed by hand.
  std::vector<torch::Tensor> ins, outs;
  torch::Tensor x = b.inputs;
  for (int i = 0; i < m.num_layers(); ++i) {
    torch::Tensor in = x.detach();
    if (in.is_floating_point()) in.requires_grad_(true);
    ins.push_back(in);
    outs.push_back(m.Forward(in, i, i));
    x = outs.back();
  }
  EXPECT_TRUE(torch::allclose(x, whole, 1e-12, 1e-12));
  torch::Tensor loss = m.loss(x, b.targets);
  torch::autograd::backward({loss});
  for (int i = m.num_layers() - 1; i > 0; --i) {
    ASSERT_TRUE(ins[i].grad().defined()) << m.layers[i].name;
    torch::autograd::backward({outs[i - 1]}, {ins[i].grad()});
  }
  auto staged_grads = Grads(params);
  ASSERT_EQ(staged_grads.size(), whole_grads.size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::allclose(staged_grads[i], whole_grads[i], 1e-10, 1e-12)) << i;
}

TEST_P(EveryModel, LayerNamesUniqueAndShapesDeclared) {
  Model m = BuildModel(GetParam(), Small(GetParam()), 1);
  std::set<std::string> names;
  for (const auto& l : m.layers) EXPECT_TRUE(names.insert(l.name).second) << l.name;
  Batch b = SomeBatch(m, 3);
  EXPECT_EQ(b.inputs.scalar_type(), m.input_dtype);
  EXPECT_EQ(b.targets.scalar_type(), m.target_dtype);
  torch::NoGradGuard no_grad;
  torch::Tensor y = m.Forward(b.inputs);
  EXPECT_EQ(y.size(0), 3);
  EXPECT_TRUE(m.loss(y, b.targets).dim() == 0);
}

TEST_P(EveryModel, CountedParametersEqualBuilt) {
  Model m = BuildModel(GetParam(), Small(GetParam()), 1);
  EXPECT_EQ(m.ParameterCount(), CountModelParameters(GetParam(), Small(GetParam())));
  Model d = BuildModel(GetParam(), {}, 1);  // the defaults are small too
  EXPECT_EQ(d.ParameterCount(), CountModelParameters(GetParam(), {}));
}

TEST_P(EveryModel, DeterministicFromSeed) {
  auto flat = [](const Model& m) {
    std::vector<torch::Tensor> ps;
    for (auto& p : m.Parameters(0, m.num_layers() - 1)) ps.push_back(p.flatten());
    return torch::cat(ps);
  };
  auto a = flat(BuildModel(GetParam(), Small(GetParam()), 5));
  auto b = flat(BuildModel(GetParam(), Small(GetParam()), 5));
  auto c = flat(BuildModel(GetParam(), Small(GetParam()), 6));
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(a, c));
  auto d = flat(BuildModel(GetParam(), Small(GetParam()), 5, torch::kFloat64));
  EXPECT_EQ(d.scalar_type(), torch::kFloat64);
  EXPECT_TRUE(torch::allclose(d.to(torch::kFloat32), a));
}

TEST_P(EveryModel, FewTrainingStepsLowerTheLoss) {
  Model m = BuildModel(GetParam(), Small(GetParam()), 3);
  Batch b = SomeBatch(m, 8);
  auto params = m.Parameters(0, m.num_layers() - 1);
  torch::optim::Adam opt(params, torch::optim::AdamOptions(1e-2));
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    opt.zero_grad();
    torch::Tensor loss = m.loss(m.Forward(b.inputs), b.targets);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.8 * first) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Zoo, EveryModel, ::testing::ValuesIn(ModelNames()),
                         [](const auto& info) { return info.param; });

TEST(Zoo, AllFiveModels) {
  EXPECT_EQ(ModelNames(), (std::vector<std::string>{"bert", "gpt", "mlp", "resnet50", "vgg19"}));
}

TEST(Zoo, UnknownModelListsKnownOnes) {
  try {
    BuildModel("alexnet", {}, 1);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mlp"), std::string::npos) << e.what();
  }
}

// Causality: a GPT output position never depends on later tokens.
TEST(Gpt, CausalAttention) {
  Model m = BuildModel("gpt", Small("gpt"), 1, torch::kFloat64);
  Batch b = SomeBatch(m, 2);
  torch::Tensor changed = b.inputs.clone();
  changed.select(1, 7).fill_(3);  // the last of 8 positions
  torch::NoGradGuard no_grad;
  torch::Tensor y = m.Forward(b.inputs), z = m.Forward(changed);
  EXPECT_TRUE(torch::allclose(y.slice(1, 0, 7), z.slice(1, 0, 7)));
  EXPECT_FALSE(torch::allclose(y.select(1, 7), z.select(1, 7)));
}

TEST(Zoo, BadOptionsAreInputErrors) {
  EXPECT_THROW(BuildModel("mlp", {{"depth", "3"}}, 1), InputError);
  EXPECT_THROW(BuildModel("mlp", {{"hidden", "0"}}, 1), InputError);
  EXPECT_THROW(BuildModel("mlp", {{"hidden", "12x"}}, 1), InputError);
  EXPECT_THROW(BuildModel("mlp", {{"preset", "huge"}}, 1), InputError);
  try {
    ResolveModelOptions("mlp", {{"depth", "3"}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hidden"), std::string::npos) << e.what();
  }
}

TEST(Zoo, PresetThenExplicitOptions) {
  ModelOptions o = ResolveModelOptions("mlp", {{"preset", "wide"}, {"layers", "3"}});
  EXPECT_EQ(o["hidden"], "4096");
  EXPECT_EQ(o["layers"], "3");
}

TEST(Zoo, ParseModelFlags) {
  EXPECT_EQ(ParseModelFlags({"--hidden", "64", "--layers=3", "classes=4"}),
            (ModelOptions{{"hidden", "64"}, {"layers", "3"}, {"classes", "4"}}));
  EXPECT_THROW(ParseModelFlags({"hidden"}), InputError);
  EXPECT_THROW(ParseModelFlags({"--hidden"}), InputError);
}

// The documented presets (docs/models.md): counted by formula, and built where small.
TEST(Zoo, PresetParameterCounts) {
  const std::map<std::pair<std::string, std::string>, int64_t> documented = {
      {{"mlp", ""}, 269322},
      {{"mlp", "fashion-mnist"}, 669706},
      {{"mlp", "wide"}, 120725514},
      {{"vgg19", ""}, 339794},
      {{"vgg19", "paper"}, 143667240},  // torchvision's vgg19: 143,667,240
      {{"vgg19", "cifar"}, 20554826},
      {{"resnet50", ""}, 376722},
      {{"resnet50", "paper"}, 25557032},  // torchvision's resnet50: 25,557,032
      {{"bert", ""}, 170434},
      {{"bert", "bert48"}, 637451266},  // the paper's BERT-48: "640M"
      {{"bert", "large"}, 335141890},
      {{"bert", "base"}, 109482242},
      {{"gpt", ""}, 120704},
      {{"gpt", "char-small"}, 842624},
      {{"gpt", "gpt2-small"}, 163087441},  // GPT-2 small with an untied output layer
  };
  int presets = 0;
  for (const auto& name : ModelNames()) presets += 1 + ModelPresets(name).size();
  EXPECT_EQ(presets, static_cast<int>(documented.size()));
  for (const auto& [key, count] : documented) {
    ModelOptions o;
    if (!key.second.empty()) o["preset"] = key.second;
    EXPECT_EQ(CountModelParameters(key.first, o), count) << key.first << " " << key.second;
    if (count < 30'000'000) {
      EXPECT_EQ(BuildModel(key.first, o, 1).ParameterCount(), count)
          << key.first << " " << key.second;
    }
  }
}

// An independent reference for the MLP: the same parameters applied by hand.
TEST(Mlp, MatchesHandWrittenReference) {
  Model m = BuildModel("mlp", Small("mlp"), 2, torch::kFloat64);
  Batch b = SomeBatch(m, 5);
  auto ps = m.Parameters(0, m.num_layers() - 1);
  ASSERT_EQ(ps.size(), 8u);  // 3 hidden + head, weight and bias each
  torch::Tensor h = b.inputs;
  for (size_t i = 0; i + 2 < ps.size(); i += 2) h = torch::relu(h.matmul(ps[i].t()) + ps[i + 1]);
  h = h.matmul(ps[6].t()) + ps[7];
  EXPECT_TRUE(torch::allclose(m.Forward(b.inputs), h));
}

}  // namespace
}  // namespace dapple
