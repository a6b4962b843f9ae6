// LayerGraphBuilder: see graph_layer_build.h.
#include "dapple/models/graph_layer_build.h"

#include <algorithm>
#include <functional>
#include <set>

#include "dapple/common/error.h"

namespace dapple::internal {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

bool IsTensor(Value* v) { return v->type()->kind() == c10::TypeKind::TensorType; }

// Inputs in `live` that an operation of `nodes` writes in place (relu_, add_): the layer
// works on a copy, since a received activation is a leaf that autograd does not let change.
std::set<Value*> WrittenInPlace(const std::vector<Node*>& nodes, const std::set<Value*>& live) {
  std::set<Value*> written;
  std::function<void(Node*)> visit = [&](Node* n) {
    if (const c10::FunctionSchema* s = n->maybeSchema()) {
      for (size_t i = 0; i < n->inputs().size() && i < s->arguments().size(); ++i) {
        const c10::AliasInfo* a = s->arguments()[i].alias_info();
        if (a && a->isWrite() && live.count(n->input(i))) written.insert(n->input(i));
      }
    }
    for (torch::jit::Block* b : n->blocks())
      for (Node* m : b->nodes()) visit(m);
  };
  for (Node* n : nodes) visit(n);
  return written;
}

}  // namespace

void ForEachUse(Node* n, const std::function<void(Value*)>& fn) {
  for (Value* v : n->inputs()) fn(v);
  for (torch::jit::Block* b : n->blocks()) {
    for (Node* m : b->nodes()) ForEachUse(m, fn);
    for (Value* v : b->return_node()->inputs()) fn(v);
  }
}

LayerGraphBuilder::LayerGraphBuilder(Graph& g, Value* x, Value* target, std::vector<AttrRef> lifted,
                                     size_t first_attr, std::string file)
    : g_(g),
      x_(x),
      target_(target),
      lifted_(std::move(lifted)),
      first_attr_(first_attr),
      file_(std::move(file)) {}

std::vector<Value*> LayerGraphBuilder::LiveAt(size_t c) const {
  std::vector<Value*> live;
  if (c == 0) return {x_};
  for (const auto& [v, d] : def_) {
    auto it = last_use_.find(v);
    if (d < static_cast<int>(c) && it != last_use_.end() && it->second >= static_cast<int>(c))
      live.push_back(v);
  }
  std::sort(live.begin(), live.end(),
            [&](Value* a, Value* b) { return order_.at(a) < order_.at(b); });
  return live;
}

std::vector<size_t> LayerGraphBuilder::Cut(std::vector<std::vector<Node*>>* groups,
                                           const std::vector<Node*>& loss_nodes,
                                           Value* final_value) {
  loss_nodes_ = loss_nodes;
  final_ = final_value;
  std::vector<size_t> first(groups->size());
  for (size_t i = 0; i < first.size(); ++i) first[i] = i;
  for (;;) {
    groups_ = *groups;
    const int n = static_cast<int>(groups_.size());
    def_ = {{x_, -1}};
    order_ = {{x_, 0}};
    last_use_.clear();
    auto visit = [&](const std::vector<Node*>& nodes, int k) {
      for (Node* node : nodes) {
        ForEachUse(node, [&](Value* v) {
          auto d = def_.find(v);
          if (d != def_.end() && d->second < k) last_use_[v] = std::max(last_use_[v], k);
        });
        for (Value* o : node->outputs()) {
          def_[o] = k;
          order_[o] = static_cast<int>(order_.size());
        }
      }
    };
    for (int k = 0; k < n; ++k) visit(groups_[k], k);
    visit(loss_nodes_, n);
    if (target_ == nullptr) last_use_[final_] = std::max(last_use_[final_], n);
    size_t bad = 0;
    for (size_t c = 1; c < groups_.size() && bad == 0; ++c)
      for (Value* v : LiveAt(c))
        if (!IsTensor(v)) bad = c;
    if (bad == 0) break;
    auto& into = (*groups)[bad - 1];
    into.insert(into.end(), (*groups)[bad].begin(), (*groups)[bad].end());
    groups->erase(groups->begin() + static_cast<std::ptrdiff_t>(bad));
    first.erase(first.begin() + static_cast<std::ptrdiff_t>(bad));
  }
  std::vector<Value*> out = LiveAt(groups_.size());
  if (out.size() != 1 || !IsTensor(out[0])) {
    ThrowInput("{}: the {} uses {} values of the model; dapple passes one tensor to it", file_,
               target_ ? "loss computed in forward" : "model's output", out.size());
  }
  return first;
}

GraphLayer LayerGraphBuilder::Build(size_t k) const {
  return BuildGraph(groups_.at(k), LiveAt(k), LiveAt(k + 1));
}

GraphLayer LayerGraphBuilder::BuildLoss() const {
  std::vector<Value*> in = LiveAt(groups_.size());
  in.push_back(target_);
  GraphLayer layer = BuildGraph(loss_nodes_, in, {final_});
  layer.name = "loss";
  return layer;
}

GraphLayer LayerGraphBuilder::BuildGraph(const std::vector<Node*>& nodes,
                                         const std::vector<Value*>& inputs,
                                         const std::vector<Value*>& outputs) const {
  GraphLayer layer;
  layer.graph = std::make_shared<Graph>();
  Graph& out = *layer.graph;
  std::unordered_map<Value*, Value*> env;
  std::set<Value*> live(inputs.begin(), inputs.end());
  std::set<Value*> written = WrittenInPlace(nodes, live);
  for (Value* v : inputs) {
    Value* in = out.addInput()->copyMetadata(v);
    env[v] = written.count(v) ? out.insert(c10::aten::clone, {in}) : in;
  }
  layer.num_live_in = inputs.size();
  std::function<Value*(Value*)> value_of = [&](Value* v) -> Value* {
    if (auto it = env.find(v); it != env.end()) return it->second;
    Node* def = v->node();
    if (def->kind() == c10::prim::Constant) {
      Node* c = out.insertNode(out.createClone(def, value_of));
      return env[v] = c->output();
    }
    if (def == g_.param_node() && v->offset() >= first_attr_) {
      layer.attrs.push_back(lifted_.at(v->offset() - first_attr_));
      return env[v] = out.addInput()->copyMetadata(v);
    }
    throw Error(file_ + ": internal error: a layer reads a value no earlier layer defines");
  };
  for (Node* n : nodes) {
    Node* c = out.insertNode(out.createClone(n, value_of));
    for (size_t i = 0; i < n->outputs().size(); ++i) env[n->output(i)] = c->output(i);
  }
  for (Value* v : outputs) out.registerOutput(value_of(v));
  out.lint();
  return layer;
}

}  // namespace dapple::internal
