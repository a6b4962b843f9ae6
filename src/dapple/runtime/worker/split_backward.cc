// The split backward of the zb schedules (Note [ZB-H1] in schedule/make_schedule.cc): I
// computes only the gradient the previous stage waits for, W the weight gradients.
//
// Note [Splitting the backward at layer outputs]: F keeps every layer's output. I runs
// autograd from the stage's root (its output with the received gradient, or the loss on
// the last stage) to the stage input and every layer output at once, with the graph kept
// (torch::autograd::grad, retain_graph): autograd only runs the nodes on paths to those
// tensors and a node computes only the gradients of inputs it must, so no weight gradient
// is computed. Its results are the gradient to send back and, for every layer, the
// gradient of the loss with respect to the layer's output. W then runs, for each layer
// from the last one down, autograd from that output with that gradient to the layer's
// parameters only (torch::autograd::backward with `inputs`), which accumulates into .grad
// through the parameters' AccumulateGrad nodes, so the allreduce buckets' hooks see it
// (Note [Gradients are bucket views]). What W computes again is a layer's internal input
// gradients between its output and its parameters (none for a single linear map), which
// the profiler's backward_input_ms / backward_weight_ms measure the same way. A parameter
// used by several layers of one stage would be counted from each of their outputs once
// per path: zb schedules need parameters owned by one layer (the zoo's are).
#include <torch/autograd.h>

#include "dapple/common/error.h"
#include "dapple/runtime/worker/stage_worker.h"

namespace dapple {

void StageWorker::InputGrad(int mb) {
  auto it = slots_.find(mb);
  DAPPLE_CHECK(it != slots_.end(), "I before its F");
  Slot& s = it->second;
  if (recomputes_) {  // Note [Re-computation per layer] (recompute_segments.cc)
    InputGradBlocks(s, mb);
    return;
  }
  const bool last = stage_ + 1 == grid_.num_virtual_stages();
  const int n = last_ - first_ + 1;
  DAPPLE_CHECK(static_cast<int>(s.layer_outputs.size()) == n, "F did not keep the layer outputs");
  // The roots: the loss, or the stage's outputs that carry a gradient with the received
  // gradients (Note [Boundary tensors]).
  Activations roots, root_grads;
  if (last) {
    roots.push_back(s.loss);
  } else {
    OutputRoots(s.output, TakeReceived(Op::kRecvGrad, mb), roots, root_grads);
  }
  const bool has_root = !roots.empty() && roots[0].requires_grad();
  const SplitTargets targets = SplitBackwardTargets(s, n);
  std::vector<torch::Tensor> grads;
  if (has_root && !targets.wrt.empty()) {
    grads = torch::autograd::grad(roots, targets.wrt, root_grads, /*retain_graph=*/true,
                                  /*create_graph=*/false, /*allow_unused=*/true);
  }
  s.w_roots.assign(n, Activations());
  s.w_grads.assign(n, Activations());
  if (has_root) {
    s.w_roots[n - 1] = roots;
    s.w_grads[n - 1] = root_grads;
  }
  KeepLayerOutputGrads(s, targets, grads);
  if (stage_ > 0) StoreInputGrads(s, targets.input_of, grads);
  s.layer_outputs.clear();  // the roots keep what W needs
  s.output.clear();
  s.loss = torch::Tensor();
}

// The stage inputs that carry a gradient, then the outputs of every layer but the last (whose
// outputs are the roots).
StageWorker::SplitTargets StageWorker::SplitBackwardTargets(const Slot& s, int n) const {
  SplitTargets t;
  if (stage_ > 0) {
    for (size_t i = 0; i < s.input.size(); ++i) {
      if (in_grad_[i] && s.input[i].requires_grad()) {
        t.wrt.push_back(s.input[i]);
        t.input_of.push_back(static_cast<int>(i));
      }
    }
  }
  for (int l = 0; l + 1 < n; ++l) {
    for (size_t k = 0; k < s.layer_outputs[l].size(); ++k) {
      if (!s.layer_outputs[l][k].requires_grad()) continue;
      t.wrt.push_back(s.layer_outputs[l][k]);
      t.output_of.push_back({l, static_cast<int>(k)});
    }
  }
  return t;
}

// Every layer output's gradient becomes a root of W for its layer.
void StageWorker::KeepLayerOutputGrads(Slot& s, const SplitTargets& targets,
                                       const std::vector<torch::Tensor>& grads) {
  for (size_t k = 0; k < targets.output_of.size() && !grads.empty(); ++k) {
    const torch::Tensor& g = grads[targets.input_of.size() + k];
    if (!g.defined()) continue;  // the roots do not depend on this output
    auto [l, t] = targets.output_of[k];
    s.w_roots[l].push_back(s.layer_outputs[l][t]);
    s.w_grads[l].push_back(g);
  }
}

// The gradients to send back, one per stage input that carries one (zeros where the roots do
// not depend on it).
void StageWorker::StoreInputGrads(Slot& s, const std::vector<int>& input_of,
                                  const std::vector<torch::Tensor>& grads) {
  s.grad_in.clear();
  size_t k = 0;
  for (size_t i = 0; i < s.input.size(); ++i) {
    if (!in_grad_[i]) continue;
    torch::Tensor g;
    if (k < input_of.size() && input_of[k] == static_cast<int>(i) && !grads.empty()) g = grads[k++];
    s.grad_in.push_back(g.defined() ? g : torch::zeros_like(s.input[i]));
  }
}

void StageWorker::WeightGrad(int mb) {
  auto it = slots_.find(mb);
  DAPPLE_CHECK(it != slots_.end() && !it->second.w_roots.empty(), "W before its I");
  Slot& s = it->second;
  // From the last layer down, the order in which a whole backward would produce them, so
  // the allreduce buckets fill in the order they are launched.
  for (int i = static_cast<int>(s.w_roots.size()) - 1; i >= 0; --i) {
    if (s.w_roots[i].empty()) continue;
    std::vector<torch::Tensor> params;
    for (const torch::Tensor& p : model_.Parameters(first_ + i, first_ + i))
      if (p.requires_grad()) params.push_back(p);
    if (params.empty()) continue;
    // The last layer's root may be the loss (no gradient given: ones).
    const Activations& grads = s.w_grads[i];
    // The graph is kept: the layers' roots share the history below them; it goes with
    // the slot.
    torch::autograd::backward(s.w_roots[i], grads, /*retain_graph=*/true,
                              /*create_graph=*/false, params);
  }
  AddLive(-s.live_bytes, -1);
  slots_.erase(it);
}

}  // namespace dapple
