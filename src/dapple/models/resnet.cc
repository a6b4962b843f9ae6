// ResNet-50 (He et al., v1.5: stride on the 3x3 conv) as 18 layers: the stem (7x7 conv,
// norm, ReLU, 3x3 max-pool), the 16 bottleneck blocks (3, 4, 6, 3 per stage) and the head
// (global average pool, fully connected). Channels scale with `width`. With norm=batch
// (default) the layers use batch statistics in training, so a micro-batch's result depends on
// its micro-batch size; norm=none drops normalisation for exact pipeline-equivalence runs.
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "dapple/common/error.h"
#include "dapple/models/zoo_internal.h"

namespace dapple::internal {
namespace {

const int kBlocks[4] = {3, 4, 6, 3};
const int64_t kMid[4] = {64, 128, 256, 512};

// A conv without bias, then (with norm) batch norm.
class ConvNormImpl : public torch::nn::Module {
 public:
  ConvNormImpl(int64_t in, int64_t out, int64_t k, int64_t stride, bool norm)
      : conv_(register_module(
            "conv",
            torch::nn::Conv2d(
                torch::nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false)))) {
    if (norm) bn_ = register_module("bn", torch::nn::BatchNorm2d(out));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = conv_(x);
    return bn_ ? bn_(x) : x;
  }

 private:
  torch::nn::Conv2d conv_;
  torch::nn::BatchNorm2d bn_{nullptr};
};
TORCH_MODULE(ConvNorm);

class StemImpl : public torch::nn::Module {
 public:
  StemImpl(int64_t in, int64_t out, bool norm)
      : conv_(register_module("conv", ConvNorm(in, out, 7, 2, norm))) {}
  torch::Tensor forward(torch::Tensor x) {
    return torch::max_pool2d(torch::relu(conv_(x)), 3, 2, 1);
  }

 private:
  ConvNorm conv_;
};

class BottleneckImpl : public torch::nn::Module {
 public:
  BottleneckImpl(int64_t in, int64_t mid, int64_t stride, bool norm)
      : a_(register_module("a", ConvNorm(in, mid, 1, 1, norm))),
        b_(register_module("b", ConvNorm(mid, mid, 3, stride, norm))),
        c_(register_module("c", ConvNorm(mid, 4 * mid, 1, 1, norm))) {
    if (stride != 1 || in != 4 * mid)
      down_ = register_module("down", ConvNorm(in, 4 * mid, 1, stride, norm));
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor y = c_(torch::relu(b_(torch::relu(a_(x)))));
    return torch::relu(y + (down_ ? down_(x) : x));
  }

 private:
  ConvNorm a_, b_, c_, down_{nullptr};
};

class HeadImpl : public torch::nn::Module {
 public:
  HeadImpl(int64_t in, int64_t classes)
      : fc_(register_module("fc", torch::nn::Linear(in, classes))) {}
  torch::Tensor forward(torch::Tensor x) { return fc_(x.mean({2, 3})); }

 private:
  torch::nn::Linear fc_;
};

struct ResNetSizes {
  double width;
  int64_t image, channels, classes;
  bool norm;
};

ResNetSizes ReadResNetSizes(const OptionReader& o) {
  ResNetSizes s{o.Positive("width"), o.Int("image"), o.Int("channels"), o.Int("classes"),
                o.Choice("norm", {"batch", "none"}) == "batch"};
  if (s.image < 8) ThrowInput("model resnet50: option image: must be at least 8, got {}", s.image);
  return s;
}

ZooModel BuildResNet(const OptionReader& o) {
  ResNetSizes s = ReadResNetSizes(o);
  ZooModel z;
  Model& m = z.model;
  int64_t in = Scaled(64, s.width);
  z.layers.push_back({"stem", [s, in] {
                        return torch::nn::AnyModule(
                            std::make_shared<StemImpl>(s.channels, in, s.norm));
                      }});
  for (int stage = 0; stage < 4; ++stage) {
    int64_t mid = Scaled(kMid[stage], s.width);
    for (int b = 0; b < kBlocks[stage]; ++b) {
      int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      z.layers.push_back(
          {"layer" + std::to_string(stage + 1) + "." + std::to_string(b), [s, in, mid, stride] {
             return torch::nn::AnyModule(std::make_shared<BottleneckImpl>(in, mid, stride, s.norm));
           }});
      in = 4 * mid;
    }
  }
  z.layers.push_back({"head", [s, in] {
                        return torch::nn::AnyModule(std::make_shared<HeadImpl>(in, s.classes));
                      }});
  m.loss = [](const torch::Tensor& out, const torch::Tensor& target) {
    return torch::nn::functional::cross_entropy(out, target);
  };
  m.input_shape = {s.channels, s.image, s.image};
  m.num_classes = s.classes;
  return z;
}

int64_t CountResNet(const OptionReader& o) {
  ResNetSizes s = ReadResNetSizes(o);
  int64_t bn = s.norm ? 2 : 0;  // weight and bias per channel (running stats are buffers)
  auto conv = [&](int64_t in, int64_t out, int64_t k) { return in * out * k * k + bn * out; };
  int64_t in = Scaled(64, s.width);
  int64_t count = conv(s.channels, in, 7);
  for (int stage = 0; stage < 4; ++stage) {
    int64_t mid = Scaled(kMid[stage], s.width);
    for (int b = 0; b < kBlocks[stage]; ++b) {
      bool down = (stage > 0 && b == 0) || in != 4 * mid;
      count += conv(in, mid, 1) + conv(mid, mid, 3) + conv(mid, 4 * mid, 1);
      if (down) count += conv(in, 4 * mid, 1);
      in = 4 * mid;
    }
  }
  return count + in * s.classes + s.classes;
}

}  // namespace

ZooEntry ResNet50Entry() {
  ZooEntry e;
  e.description = "ResNet-50: stem, 16 bottleneck blocks, head";
  e.defaults = {
      {"width", "0.125"}, {"image", "32"}, {"channels", "3"}, {"classes", "10"}, {"norm", "batch"}};
  e.presets = {{"paper", {{"width", "1"}, {"image", "224"}, {"classes", "1000"}}}};
  e.build = BuildResNet;
  e.count_parameters = CountResNet;
  return e;
}

}  // namespace dapple::internal
