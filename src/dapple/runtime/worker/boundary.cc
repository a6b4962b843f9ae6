// Boundary specs, the stage probe and message packing: see boundary.h.
#include "dapple/runtime/worker/boundary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "dapple/common/error.h"

namespace dapple {
namespace {

std::vector<int64_t> Shape(const TensorSpec& s, int64_t rows) {
  std::vector<int64_t> shape;
  if (s.batched) shape.push_back(rows);
  shape.insert(shape.end(), s.shape.begin(), s.shape.end());
  return shape;
}

int64_t Numel(const TensorSpec& s, int64_t rows) {
  int64_t n = 1;
  for (int64_t d : Shape(s, rows)) n *= d;
  return n;
}

int64_t Padded(int64_t bytes) { return (bytes + 7) / 8 * 8; }

std::vector<size_t> Selected(const BoundarySpec& spec, const std::vector<bool>& select) {
  DAPPLE_CHECK(select.size() == spec.size());
  std::vector<size_t> which;
  for (size_t i = 0; i < spec.size(); ++i)
    if (select[i]) which.push_back(i);
  return which;
}

}  // namespace

int64_t Bytes(const torch::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

int64_t Bytes(const Activations& a) {
  int64_t sum = 0;
  for (const auto& t : a) sum += Bytes(t);
  return sum;
}

BoundarySpec ModelInputSpec(const Model& model) {
  return {TensorSpec{model.input_shape, model.input_dtype, true}};
}

Activations MakeActivations(const BoundarySpec& spec, int64_t rows, torch::Device device,
                            bool zeros) {
  Activations a;
  for (const auto& s : spec) {
    auto opts = torch::TensorOptions().dtype(s.dtype).device(device);
    a.push_back(zeros ? torch::zeros(Shape(s, rows), opts) : torch::empty(Shape(s, rows), opts));
  }
  return a;
}

BoundarySpec ProbeStage(Model& model, int first, int last, const BoundarySpec& input,
                        torch::Device device) {
  torch::NoGradGuard no_grad;
  model.SetTraining(false);
  struct Restore {
    Model& m;
    ~Restore() { m.SetTraining(true); }
  } restore{model};
  std::vector<Activations> outs;
  for (int64_t rows : {2, 3}) {
    Activations x = MakeActivations(input, rows, device, /*zeros=*/true);
    for (int l = first; l <= last; ++l) {
      try {
        x = model.ForwardActivations(x, l, l);
      } catch (const InputError&) {
        throw;
      } catch (const std::exception& e) {
        std::string what = e.what();
        ThrowInput("model {}: layer {} fails on inputs shaped as the previous layer's outputs: {}",
                   model.name, model.layers[l].name, what.substr(0, what.find('\n')));
      }
    }
    outs.push_back(std::move(x));
  }
  BoundarySpec spec;
  for (size_t i = 0; i < outs[0].size(); ++i) {
    const torch::Tensor &a = outs[0][i], &b = outs[1][i];
    bool batched = a.dim() > 0 && b.dim() == a.dim() && a.size(0) == 2 && b.size(0) == 3;
    auto sizes = a.sizes();
    spec.push_back({std::vector<int64_t>(sizes.begin() + (batched ? 1 : 0), sizes.end()),
                    a.scalar_type(), batched, model.precision});
  }
  if (spec.empty())
    ThrowInput("model {}: layer {} returns no tensor", model.name, model.layers[last].name);
  if (last + 1 < model.num_layers() && !spec[0].batched && spec.size() == 1) {
    ThrowInput(
        "model {}: layer {}: output's first dimension is not the batch (shape {}), so the "
        "runtime cannot cut the model after it",
        model.name, model.layers[last].name, fmt::join(outs[0][0].sizes(), "x"));
  }
  return spec;
}

std::string BoundarySpecToJson(const BoundarySpec& spec) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : spec) {
    j.push_back({{"shape", s.shape}, {"dtype", static_cast<int>(s.dtype)}, {"batched", s.batched}});
    if (s.precision != Precision::kFloat32) j.back()["precision"] = ToString(s.precision);
  }
  return j.dump();
}

BoundarySpec BoundarySpecFromJson(const std::string& text) {
  BoundarySpec spec;
  try {
    for (const auto& j : nlohmann::json::parse(text)) {
      spec.push_back({j.at("shape").get<std::vector<int64_t>>(),
                      static_cast<torch::Dtype>(j.at("dtype").get<int>()),
                      j.at("batched").get<bool>()});
      if (j.contains("precision")) {
        auto p = FindPrecision(j.at("precision").get<std::string>());
        if (!p) throw Error(fmt::format("malformed boundary spec '{}': precision", text));
        spec.back().precision = *p;
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("malformed boundary spec '{}': {}", text, e.what()));
  }
  return spec;
}

torch::Tensor Pack(const Activations& tensors) {
  if (tensors.size() == 1) return tensors[0].contiguous();
  std::vector<torch::Tensor> parts;
  for (const auto& t : tensors) {
    torch::Tensor bytes = t.contiguous().view(-1).view(torch::kUInt8);
    parts.push_back(bytes);
    int64_t pad = Padded(bytes.numel()) - bytes.numel();
    if (pad > 0) parts.push_back(torch::zeros({pad}, bytes.options()));
  }
  return torch::cat(parts);
}

torch::Tensor MessageBuffer(const BoundarySpec& spec, const std::vector<bool>& select, int64_t rows,
                            torch::Device device) {
  std::vector<size_t> which = Selected(spec, select);
  if (which.size() == 1) {
    const TensorSpec& s = spec[which[0]];
    return torch::empty(Shape(s, rows), torch::TensorOptions().dtype(s.Wire()).device(device));
  }
  int64_t bytes = 0;
  for (size_t i : which)
    bytes += Padded(Numel(spec[i], rows) * static_cast<int64_t>(c10::elementSize(spec[i].Wire())));
  return torch::empty({bytes}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
}

Activations Unpack(const torch::Tensor& message, const BoundarySpec& spec,
                   const std::vector<bool>& select, int64_t rows) {
  std::vector<size_t> which = Selected(spec, select);
  if (which.size() == 1) return {message};
  Activations out;
  int64_t offset = 0;
  for (size_t i : which) {
    const TensorSpec& s = spec[i];
    int64_t bytes = Numel(s, rows) * static_cast<int64_t>(c10::elementSize(s.Wire()));
    out.push_back(message.narrow(0, offset, bytes).view(s.Wire()).view(Shape(s, rows)));
    offset += Padded(bytes);
  }
  return out;
}

Activations FromWire(Activations received, const BoundarySpec& spec,
                     const std::vector<bool>& select) {
  std::vector<size_t> which = Selected(spec, select);
  DAPPLE_CHECK(which.size() == received.size());
  for (size_t k = 0; k < which.size(); ++k) received[k] = received[k].to(spec[which[k]].dtype);
  return received;
}

}  // namespace dapple
