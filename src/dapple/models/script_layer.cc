// ScriptLayerModule: see script_layer.h.
#include "dapple/models/script_layer.h"

#include <sstream>

namespace dapple {
namespace {

// Registers `from`'s direct parameters and buffers on `into`, and a mirror of every child.
void Mirror(torch::nn::Module& into, const torch::jit::Module& from) {
  for (const auto& p : from.named_parameters(/*recurse=*/false))
    into.register_parameter(p.name, p.value, p.value.requires_grad());
  for (const auto& b : from.named_buffers(/*recurse=*/false))
    if (b.value.defined()) into.register_buffer(b.name, b.value);
  for (const auto& c : from.named_children()) {
    auto child = std::make_shared<torch::nn::Module>();
    Mirror(*child, c.value);
    into.register_module(c.name, child);
  }
}

}  // namespace

ScriptLayerModule::ScriptLayerModule(torch::jit::Module module) : module_(std::move(module)) {
  Mirror(*this, module_);
}

void ScriptLayerModule::train(bool on) {
  torch::nn::Module::train(on);
  module_.train(on);
}

c10::optional<torch::jit::Module> FindSubmodule(const torch::jit::Module& root,
                                                const std::string& path) {
  torch::jit::Module m = root;
  std::stringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '.')) {
    bool found = false;
    for (const auto& c : m.named_children()) {
      if (c.name == part) {
        m = c.value;
        found = true;
        break;
      }
    }
    if (!found) return c10::nullopt;
  }
  return m;
}

}  // namespace dapple
