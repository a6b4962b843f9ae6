// bf16 mixed precision: see Note [Mixed precision] in mixed_precision.h.
#include "dapple/models/mixed_precision.h"

#include <ATen/autocast_mode.h>
#include <torch/nn/module.h>

#include <array>

#include "dapple/common/error.h"

namespace dapple {
namespace {

// Autocast to bfloat16 on the CPU and on CUDA devices for the scope's lifetime (the calling
// thread's state, restored on exit; PyTorch 2's per-device autocast API): a layer on a GPU
// (docs/gpu.md) casts as one on the CPU does. The CUDA half has not run on a GPU; on the CPU
// it changes nothing. Leaving the outermost scope without a graph being recorded drops the
// cast cache (Note [Mixed precision]).
class AutocastBf16 {
 public:
  AutocastBf16() {
    for (size_t i = 0; i < kDevices.size(); ++i) {
      was_enabled_[i] = at::autocast::is_autocast_enabled(kDevices[i]);
      was_dtype_[i] = at::autocast::get_autocast_dtype(kDevices[i]);
      at::autocast::set_autocast_enabled(kDevices[i], true);
      at::autocast::set_autocast_dtype(kDevices[i], at::kBFloat16);
    }
    at::autocast::increment_nesting();
  }
  ~AutocastBf16() {
    if (at::autocast::decrement_nesting() == 0 && !at::GradMode::is_enabled())
      at::autocast::clear_cache();
    for (size_t i = 0; i < kDevices.size(); ++i) {
      at::autocast::set_autocast_enabled(kDevices[i], was_enabled_[i]);
      at::autocast::set_autocast_dtype(kDevices[i], was_dtype_[i]);
    }
  }
  AutocastBf16(const AutocastBf16&) = delete;
  AutocastBf16& operator=(const AutocastBf16&) = delete;

 private:
  static constexpr std::array<at::DeviceType, 2> kDevices = {at::kCPU, at::kCUDA};
  std::array<bool, 2> was_enabled_{};
  std::array<at::ScalarType, 2> was_dtype_{};
};

void CheckFloat32Masters(const Model& model) {
  for (const NamedLayer& l : model.layers) {
    if (!l.held()) continue;
    for (const auto& p : l.module->parameters()) {
      if (p.is_floating_point() && p.scalar_type() != torch::kFloat32)
        ThrowInput(
            "--precision bf16 computes over float32 master weights, but layer {} of model {} has "
            "{} parameters (use --dtype float32)",
            l.name, model.name, c10::toString(p.scalar_type()));
    }
  }
}

}  // namespace

void UseMixedPrecision(Model& model, Precision precision) {
  if (precision == Precision::kFloat32 || model.precision == precision) return;
  CheckFloat32Masters(model);
  for (NamedLayer& l : model.layers) {
    if (!l.held()) continue;
    l.forward = [inner = std::move(l.forward)](const Activations& x) {
      AutocastBf16 autocast;
      return inner(x);
    };
  }
  if (model.loss) {
    model.loss = [inner = std::move(model.loss)](const torch::Tensor& out,
                                                 const torch::Tensor& target) {
      AutocastBf16 autocast;
      return inner(out, target);
    };
  }
  model.precision = precision;
}

torch::Dtype WireDtype(torch::Dtype dtype, Precision precision) {
  return precision == Precision::kBf16 && dtype == torch::kFloat32 ? torch::kBFloat16 : dtype;
}

Activations ToWire(Activations a, Precision precision) {
  for (torch::Tensor& t : a)
    if (t.defined()) t = t.to(WireDtype(t.scalar_type(), precision));
  return a;
}

int64_t WireBytes(const Activations& a, Precision precision) {
  int64_t sum = 0;
  for (const torch::Tensor& t : a)
    if (t.defined())
      sum +=
          t.numel() * static_cast<int64_t>(c10::elementSize(WireDtype(t.scalar_type(), precision)));
  return sum;
}

void ClearCastCache() { at::autocast::clear_cache(); }

}  // namespace dapple
