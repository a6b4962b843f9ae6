// RunNodes: see exported_program.h.
#include <ATen/core/stack.h>

#include "dapple/models/exported_program.h"

namespace dapple {
namespace {

c10::IValue ArgValue(const ExportArg& a, const std::vector<c10::IValue>& env) {
  switch (a.kind) {
    case ExportArg::Kind::kConstant:
      return a.constant;
    case ExportArg::Kind::kTensor:
    case ExportArg::Kind::kSymInt:
      return env[a.values[0]];
    case ExportArg::Kind::kTensors: {
      c10::List<at::Tensor> list;
      for (int v : a.values) list.push_back(env[v].toTensor());
      return list;
    }
    case ExportArg::Kind::kOptionalTensors: {
      c10::List<std::optional<at::Tensor>> list;
      for (int v : a.values)
        list.push_back(v < 0 ? std::nullopt : std::optional<at::Tensor>(env[v].toTensor()));
      return list;
    }
    case ExportArg::Kind::kSymInts: {
      std::vector<int64_t> ints = a.constant.toIntVector();
      for (size_t i = 0; i < ints.size(); ++i)
        if (a.values[i] >= 0) ints[i] = env[a.values[i]].toInt();
      return ints;
    }
  }
  return {};
}

int64_t PythonOp(const std::string& op, int64_t a, int64_t b) {
  if (op == "mul") return a * b;
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  int64_t q = a / b;  // floordiv: rounds toward minus infinity, as Python's //
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

// Note [Evaluation of a training graph]: a program exported in training mode has the mode
// baked in (batch_norm(training=True), dropout(train=True), num_batches_tracked.add_(1)).
// Evaluation (profiling probes, --eval) runs the same graph with those flags false and the
// batch count skipped, as the module's eval() would have traced it.
void RunNodes(const ExportGraph& graph, const std::vector<int>& nodes, bool training,
              std::vector<c10::IValue>* env) {
  torch::jit::Stack stack;
  for (int k : nodes) {
    const ExportNode& n = graph.nodes[k];
    if (!training && n.counts_batches) continue;
    stack.clear();
    for (const ExportArg& a : n.args) stack.push_back(ArgValue(a, *env));
    if (!training && n.mode_arg >= 0) stack[n.mode_arg] = false;
    if (!n.op) {
      (*env)[n.outputs.at(0).at(0)] =
          PythonOp(n.python_op, stack.at(0).toInt(), stack.at(1).toInt());
      continue;
    }
    n.op->callBoxed(stack);
    for (size_t i = 0; i < n.outputs.size() && i < stack.size(); ++i) {
      const std::vector<int>& ids = n.outputs[i];
      if (ids.empty()) continue;
      if (stack[i].isTensorList()) {
        auto list = stack[i].toTensorList();
        for (size_t j = 0; j < ids.size() && j < list.size(); ++j) (*env)[ids[j]] = list.get(j);
      } else {
        (*env)[ids[0]] = stack[i];
      }
    }
  }
}

}  // namespace dapple
