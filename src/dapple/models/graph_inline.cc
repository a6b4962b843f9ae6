// InlineForward and LiftAttributes: see graph_inline.h.
#include "dapple/models/graph_inline.h"

#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <map>
#include <optional>

#include "dapple/common/error.h"

namespace dapple::internal {
namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;
namespace prim = c10::prim;
namespace attr = c10::attr;

// The path from `self` to the module `v` holds ("" for self); nullopt when `v` is not reached
// from self by attribute reads alone.
std::optional<std::string> ModulePath(Value* v, Value* self) {
  std::vector<std::string> names;
  while (v != self) {
    if (v->node()->kind() != prim::GetAttr) return std::nullopt;
    names.push_back(v->node()->s(attr::name));
    v = v->node()->input(0);
  }
  std::string path;
  for (auto it = names.rbegin(); it != names.rend(); ++it) path += (path.empty() ? "" : ".") + *it;
  return path;
}

// Inlines every call in `block` and tags every node, in nested blocks too, with the path of
// the submodule whose code it is: an inlined method's nodes with the called submodule's path,
// a plain function's or the same module's method's with the caller's, other nodes with their
// enclosing node's (`inherited`). Nested nodes need tags because constant propagation later
// moves the taken branch of an `if` on a module flag into the enclosing block.
void InlineCalls(Block* block, Value* self, InlinedForward* out, const std::string& inherited,
                 const std::string& file) {
  for (Node* n = block->nodes().front(); n != block->return_node();) {
    std::string path = out->origin.emplace(n, inherited).first->second;
    bool call = n->kind() == prim::CallMethod || n->kind() == prim::CallFunction;
    if (!call) {
      for (Block* sub : n->blocks()) InlineCalls(sub, self, out, path, file);
      n = n->next();
      continue;
    }
    torch::jit::GraphFunction* fn = torch::jit::tryToGraphFunction(n);
    if (fn == nullptr)
      ThrowInput("{}: forward calls {}, which has no TorchScript graph; dapple cannot cut it", file,
                 n->kind() == prim::CallMethod ? n->s(attr::name) : "a built-in function");
    if (n->kind() == prim::CallMethod) {
      if (auto p = ModulePath(n->input(0), self); p && !p->empty()) path = *p;
    }
    Node* before = n->prev();
    Node* after = n->next();
    out->origin.erase(n);
    if (n->kind() == prim::CallFunction) n->removeInput(0);  // the function itself
    torch::jit::inlineCallTo(n, fn);
    for (Node* m = before->next(); m != after; m = m->next()) out->origin[m] = path;
    n = before->next();  // the inlined nodes may call further
  }
}

bool IsModule(Value* v) {
  auto cls = v->type()->cast<c10::ClassType>();
  return cls && cls->is_module();
}

void CollectGetAttrs(Block* block, std::vector<Node*>* out) {
  for (Node* n : block->nodes()) {
    if (n->kind() == prim::GetAttr) out->push_back(n);
    for (Block* sub : n->blocks()) CollectGetAttrs(sub, out);
  }
}

}  // namespace

torch::jit::Module SubmoduleAt(const torch::jit::Module& top, const std::string& path) {
  torch::jit::Module m = top;
  size_t start = 0;
  while (start < path.size()) {
    size_t dot = path.find('.', start);
    if (dot == std::string::npos) dot = path.size();
    m = m.attr(path.substr(start, dot - start)).toModule();
    start = dot + 1;
  }
  return m;
}

InlinedForward InlineForward(const torch::jit::Module& top, const std::string& file) {
  InlinedForward out;
  out.graph = top.get_method("forward").graph()->copy();
  InlineCalls(out.graph->block(), out.graph->inputs()[0], &out, "", file);
  return out;
}

void LiftAttributes(const torch::jit::Module& top, Graph& graph, std::vector<AttrRef>* lifted,
                    const std::string& file) {
  Value* self = graph.inputs()[0];
  std::vector<Node*> reads;
  CollectGetAttrs(graph.block(), &reads);
  std::map<std::string, Value*> inputs;  // full name -> lifted input
  std::vector<Node*> module_reads;
  for (Node* n : reads) {
    if (IsModule(n->output())) {
      module_reads.push_back(n);
      continue;
    }
    auto path = ModulePath(n->input(0), self);
    if (!path)
      ThrowInput("{}: forward reads attribute {} of a non-module object", file, n->s(attr::name));
    AttrRef ref{*path, n->s(attr::name)};
    c10::IValue value = SubmoduleAt(top, ref.path).attr(ref.name);
    Value* replacement = nullptr;
    if (value.isTensor() || ref.name == "training") {
      auto [it, fresh] = inputs.try_emplace(ref.FullName(), nullptr);
      if (fresh) {
        it->second = graph.addInput(ref.name)->setType(n->output()->type());
        lifted->push_back(ref);
      }
      replacement = it->second;
    } else {
      torch::jit::WithInsertPoint at(graph.block()->nodes().front());
      Value* constant = nullptr;
      try {
        constant = graph.insertConstant(value);
      } catch (const std::exception&) {
        ThrowInput("{}: forward reads {} (a {}), which dapple cannot hold as a constant", file,
                   ref.FullName(), value.tagKind());
      }
      replacement = constant;
      if (!constant->type()->isSubtypeOf(*n->output()->type()))
        constant->setType(n->output()->type());
    }
    n->output()->replaceAllUsesWith(replacement);
    n->destroy();
  }
  for (auto it = module_reads.rbegin(); it != module_reads.rend(); ++it) {
    Node* n = *it;
    if (!n->output()->hasUses()) {
      n->destroy();
      continue;
    }
    Node* user = n->output()->uses()[0].user;
    ThrowInput(
        "{}: forward uses submodule '{}' as a value ({}); dapple cuts models whose submodules "
        "are only called",
        file, n->s(attr::name), user->kind().toQualString());
  }
  if (self->hasUses()) {
    ThrowInput("{}: forward uses the module itself as a value ({}); dapple cannot cut it", file,
               self->uses()[0].user->kind().toQualString());
  }
  graph.eraseInput(0);
}

}  // namespace dapple::internal
