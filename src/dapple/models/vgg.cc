// VGG-19 (Simonyan & Zisserman, configuration E) as 19 layers: 16 conv layers (3x3 conv +
// ReLU, the five max-pools folded into the conv before them) and 3 fully connected layers.
// No batch norm and no dropout (dropout would make runs differ from their layer lists).
// Channels scale with `width`; the input is channels x image x image (image >= 32).
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "dapple/common/error.h"
#include "dapple/models/zoo_internal.h"

namespace dapple::internal {
namespace {

// Output channels of the 16 convs; true = a 2x2 max-pool follows.
const std::vector<std::pair<int64_t, bool>> kConvs = {
    {64, false},  {64, true},   {128, false}, {128, true},  {256, false}, {256, false},
    {256, false}, {256, true},  {512, false}, {512, false}, {512, false}, {512, true},
    {512, false}, {512, false}, {512, false}, {512, true}};

class ConvLayerImpl : public torch::nn::Module {
 public:
  ConvLayerImpl(int64_t in, int64_t out, bool pool)
      : conv_(register_module("conv",
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1)))),
        pool_(pool) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(conv_(x));
    return pool_ ? torch::max_pool2d(x, 2) : x;
  }

 private:
  torch::nn::Conv2d conv_;
  bool pool_;
};

class FcLayerImpl : public torch::nn::Module {
 public:
  FcLayerImpl(int64_t in, int64_t out, bool relu)
      : fc_(register_module("fc", torch::nn::Linear(in, out))), relu_(relu) {}
  torch::Tensor forward(torch::Tensor x) {
    x = fc_(x.flatten(1));
    return relu_ ? torch::relu(x) : x;
  }

 private:
  torch::nn::Linear fc_;
  bool relu_;
};

struct VggSizes {
  double width;
  int64_t image, channels, classes, fc;
  int64_t final_side() const { return image >> 5; }  // five 2x2 pools
};

VggSizes ReadVggSizes(const OptionReader& o) {
  VggSizes s{o.Positive("width"), o.Int("image"), o.Int("channels"), o.Int("classes"), o.Int("fc")};
  if (s.image < 32) ThrowInput("model vgg19: option image: must be at least 32, got {}", s.image);
  return s;
}

ZooModel BuildVgg(const OptionReader& o) {
  VggSizes s = ReadVggSizes(o);
  ZooModel z;
  Model& m = z.model;
  int64_t in = s.channels, block = 1, index = 1;
  for (auto [out, pool_after] : kConvs) {
    int64_t c = Scaled(out, s.width);
    bool pool = pool_after;
    z.layers.push_back(
        {"conv" + std::to_string(block) + "_" + std::to_string(index), [in, c, pool] {
           return torch::nn::AnyModule(std::make_shared<ConvLayerImpl>(in, c, pool));
         }});
    in = c;
    ++index;
    if (pool) ++block, index = 1;
  }
  int64_t flat = in * s.final_side() * s.final_side();
  auto fc = [](std::string name, int64_t in, int64_t out, bool relu) {
    return LayerRecipe{std::move(name), [=] {
                         return torch::nn::AnyModule(std::make_shared<FcLayerImpl>(in, out, relu));
                       }};
  };
  z.layers.push_back(fc("fc6", flat, s.fc, true));
  z.layers.push_back(fc("fc7", s.fc, s.fc, true));
  z.layers.push_back(fc("fc8", s.fc, s.classes, false));
  m.loss = [](const torch::Tensor& out, const torch::Tensor& target) {
    return torch::nn::functional::cross_entropy(out, target);
  };
  m.input_shape = {s.channels, s.image, s.image};
  m.num_classes = s.classes;
  return z;
}

int64_t CountVgg(const OptionReader& o) {
  VggSizes s = ReadVggSizes(o);
  int64_t count = 0, in = s.channels;
  for (auto [out, pool] : kConvs) {
    int64_t c = Scaled(out, s.width);
    count += in * c * 9 + c;
    in = c;
  }
  int64_t flat = in * s.final_side() * s.final_side();
  return count + flat * s.fc + s.fc + s.fc * s.fc + s.fc + s.fc * s.classes + s.classes;
}

}  // namespace

ZooEntry Vgg19Entry() {
  ZooEntry e;
  e.description = "VGG-19: 16 conv layers and 3 fully connected layers";
  e.defaults = {
      {"width", "0.125"}, {"image", "32"}, {"channels", "3"}, {"classes", "10"}, {"fc", "128"}};
  e.presets = {{"paper", {{"width", "1"}, {"image", "224"}, {"classes", "1000"}, {"fc", "4096"}}},
               {"cifar", {{"width", "1"}, {"image", "32"}, {"classes", "10"}, {"fc", "512"}}}};
  e.build = BuildVgg;
  e.count_parameters = CountVgg;
  return e;
}

}  // namespace dapple::internal
