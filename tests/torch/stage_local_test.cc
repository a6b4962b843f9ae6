// Stage-local models (Note [Stage-local models]): a process that builds only some layers
// gets the values the whole model has there; nothing else is built; the stage probe finds
// what crosses a boundary without running other layers and leaves BatchNorm statistics
// alone; several boundary tensors pack into one message and back.
#include <gtest/gtest.h>

#include "dapple/models/model.h"
#include "dapple/models/model_source.h"
#include "dapple/runtime/worker/boundary.h"

namespace dapple {
namespace {

ModelOptions SmallGpt() {
  return {{"hidden", "16"}, {"heads", "2"}, {"layers", "3"}, {"seq", "8"}, {"vocab", "30"}};
}

TEST(StageLocal, HeldLayersEqualTheWholeModelsLayers) {
  for (const std::string name : {"gpt", "resnet50"}) {
    ModelOptions o = name == "gpt" ? SmallGpt() : ModelOptions{{"width", "0.125"}, {"image", "32"}};
    Model whole = BuildModel(name, o, /*seed=*/3);
    // One range (a stage), and two (the chunks 0 and 2 of an interleaved plan's group).
    for (const LayerRange& held : {LayerRange{2, 3, {}}, LayerRange{0, 0, {{2, 3}}}}) {
      Model part = BuildModel(name, o, /*seed=*/3, torch::kFloat32, held);
      ASSERT_EQ(part.num_layers(), whole.num_layers());
      for (int i = 0; i < whole.num_layers(); ++i) {
        EXPECT_EQ(part.layers[i].name, whole.layers[i].name);
        EXPECT_EQ(part.layers[i].held(), i == 2 || i == 3 || (i == 0 && held.first == 0))
            << name << " layer " << i;
        if (!part.layers[i].held()) continue;
        auto a = part.Parameters(i, i), b = whole.Parameters(i, i);
        ASSERT_EQ(a.size(), b.size());
        for (size_t k = 0; k < a.size(); ++k)
          EXPECT_TRUE(a[k].equal(b[k])) << name << " layer " << i;
      }
      EXPECT_LT(part.ParameterCount(), whole.ParameterCount());
    }
  }
}

TEST(StageLocal, NoLayersHeldStillNamesThem) {
  Model m = BuildModel("gpt", SmallGpt(), 1, torch::kFloat32, kNoLayers);
  EXPECT_EQ(m.num_layers(), 5);
  EXPECT_EQ(m.ParameterCount(), 0);
  for (const auto& l : m.layers) EXPECT_FALSE(l.held());
}

TEST(StageLocal, ProbeOfOneStageMatchesTheWholeForwardAndKeepsBatchStatistics) {
  ModelOptions o{{"width", "0.125"}, {"image", "32"}, {"norm", "batch"}};
  Model whole = BuildModel("resnet50", o, 5);
  Model part = BuildModel("resnet50", o, 5, torch::kFloat32, LayerRange{1, 2, {}});
  // The input of layer 1 is the stem's output: take its shape from the whole model.
  torch::NoGradGuard no_grad;
  whole.SetTraining(false);
  torch::Tensor stem = whole.Forward(torch::zeros({2, 3, 32, 32}), 0, 0);
  torch::Tensor after = whole.Forward(stem, 1, 2);
  BoundarySpec in{
      {std::vector<int64_t>(stem.sizes().begin() + 1, stem.sizes().end()), torch::kFloat32, true}};
  std::vector<torch::Tensor> buffers;
  for (const auto& b : part.layers[1].module->buffers()) buffers.push_back(b.clone());
  ASSERT_FALSE(buffers.empty());
  BoundarySpec out = ProbeStage(part, 1, 2, in, torch::kCPU);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].batched);
  EXPECT_EQ(out[0].shape, std::vector<int64_t>(after.sizes().begin() + 1, after.sizes().end()));
  size_t k = 0;
  for (const auto& b : part.layers[1].module->buffers()) EXPECT_TRUE(b.equal(buffers[k++]));
  EXPECT_TRUE(part.layers[1].module->is_training());  // restored
}

TEST(Boundary, SeveralTensorsPackIntoOneMessageAndBack) {
  BoundarySpec spec{
      {{5}, torch::kFloat64, true}, {{3, 3}, torch::kBool, false}, {{2}, torch::kInt64, true}};
  const int64_t rows = 3;
  Activations a{torch::randn({rows, 5}, torch::kFloat64), torch::rand({3, 3}) > 0.5,
                torch::randint(0, 100, {rows, 2}, torch::kInt64)};
  std::vector<bool> all(3, true);
  torch::Tensor message = Pack(a);
  torch::Tensor buffer = MessageBuffer(spec, all, rows, torch::kCPU);
  ASSERT_EQ(buffer.numel(), message.numel());
  buffer.copy_(message);
  Activations back = Unpack(buffer, spec, all, rows);
  ASSERT_EQ(back.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(back[i].equal(a[i])) << i;
  // Only the gradient-carrying one: sent as itself.
  std::vector<bool> grads{true, false, false};
  EXPECT_EQ(MessageBuffer(spec, grads, rows, torch::kCPU).sizes(), a[0].sizes());
  EXPECT_EQ(BoundarySpecFromJson(BoundarySpecToJson(spec)).size(), 3u);
  EXPECT_FALSE(BoundarySpecFromJson(BoundarySpecToJson(spec))[1].batched);
}

}  // namespace
}  // namespace dapple
