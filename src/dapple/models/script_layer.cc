// ScriptLayerModule and GraphLayerRunner: see script_layer.h.
#include "dapple/models/script_layer.h"

#include <functional>
#include <map>

#include "dapple/models/graph_inline.h"

namespace dapple {

ScriptLayerModule::ScriptLayerModule(const torch::jit::Module& top,
                                     const std::vector<AttrRef>& attrs) {
  std::map<std::string, torch::nn::Module*> tree{{"", this}};
  // The mirror of the submodule at `path`, made on first use.
  std::function<torch::nn::Module*(const std::string&)> at = [&](const std::string& path) {
    if (auto it = tree.find(path); it != tree.end()) return it->second;
    size_t dot = path.rfind('.');
    torch::nn::Module* parent = at(dot == std::string::npos ? "" : path.substr(0, dot));
    auto child = std::make_shared<torch::nn::Module>();
    parent->register_module(dot == std::string::npos ? path : path.substr(dot + 1), child);
    return tree[path] = child.get();
  };
  for (const AttrRef& a : attrs) {
    torch::jit::Module owner = internal::SubmoduleAt(top, a.path);
    if (a.name == "training") {
      flag_owners_.push_back(owner);
      continue;
    }
    c10::IValue v = owner.attr(a.name);
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    const auto& type = owner.type();
    size_t slot = type->getAttributeSlot(a.name);
    if (type->is_parameter(slot)) {
      at(a.path)->register_parameter(a.name, v.toTensor(), v.toTensor().requires_grad());
    } else {
      at(a.path)->register_buffer(a.name, v.toTensor());
    }
  }
}

void ScriptLayerModule::train(bool on) {
  torch::nn::Module::train(on);
  for (auto& m : flag_owners_) m.setattr("training", on);
}

GraphLayerRunner::GraphLayerRunner(const torch::jit::Module& top, const GraphLayer& layer)
    : code_(std::make_shared<torch::jit::Code>(layer.graph, layer.name)) {
  for (const AttrRef& a : layer.attrs)
    attrs_.push_back({internal::SubmoduleAt(top, a.path), a.name});
}

std::vector<c10::IValue> GraphLayerRunner::Run(std::vector<c10::IValue> stack) const {
  for (const auto& [owner, name] : attrs_) stack.push_back(owner.attr(name));
  torch::jit::InterpreterState(*code_).run(stack);
  return stack;
}

}  // namespace dapple
