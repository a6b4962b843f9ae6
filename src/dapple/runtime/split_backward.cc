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
#include "dapple/runtime/stage_worker.h"

namespace dapple {

void StageWorker::InputGrad(int mb) {
  auto it = slots_.find(mb);
  DAPPLE_CHECK(it != slots_.end(), "I before its F");
  Slot& s = it->second;
  const bool last = stage_ + 1 == grid_.num_stages();
  const int n = last_ - first_ + 1;
  DAPPLE_CHECK(static_cast<int>(s.layer_outputs.size()) == n, "F did not keep the layer outputs");
  torch::Tensor root = last ? s.loss : s.output;
  torch::Tensor root_grad;  // undefined: ones (the scalar loss)
  if (!last) {
    auto rit = recvs_.find({Op::kRecvGrad, mb});
    DAPPLE_CHECK(rit != recvs_.end(), "I before its RG");
    std::vector<torch::Tensor> parts;
    for (const auto& w : rit->second) parts.push_back(w.tensors().at(0));
    recvs_.erase(rit);
    root_grad = parts.size() == 1 ? parts[0] : torch::cat(parts);
  }
  // What the gradients are taken with respect to: the stage input (if it needs one), then
  // the outputs of every layer but the one whose output is the root.
  std::vector<torch::Tensor> wrt;
  const bool want_input = stage_ > 0 && s.input.requires_grad();
  if (want_input) wrt.push_back(s.input);
  std::vector<int> layer_of;  // index in s.layer_outputs of wrt[k] (after the input)
  for (int i = 0; i + 1 < n; ++i) {
    if (!s.layer_outputs[i].requires_grad()) continue;
    wrt.push_back(s.layer_outputs[i]);
    layer_of.push_back(i);
  }
  s.w_roots.assign(n, torch::Tensor());
  s.w_grads.assign(n, torch::Tensor());
  std::vector<torch::Tensor> grads;
  if (root.requires_grad() && !wrt.empty()) {
    std::vector<torch::Tensor> root_grads;
    if (root_grad.defined()) root_grads.push_back(root_grad);
    grads = torch::autograd::grad({root}, wrt, root_grads, /*retain_graph=*/true,
                                  /*create_graph=*/false, /*allow_unused=*/true);
  }
  if (root.requires_grad()) {
    s.w_roots[n - 1] = root;
    s.w_grads[n - 1] = root_grad;
  }
  for (size_t k = 0; k < layer_of.size() && !grads.empty(); ++k) {
    const torch::Tensor& g = grads[k + (want_input ? 1 : 0)];
    if (!g.defined()) continue;  // the root does not depend on this output
    s.w_roots[layer_of[k]] = s.layer_outputs[layer_of[k]];
    s.w_grads[layer_of[k]] = g;
  }
  if (stage_ > 0) {
    s.grad_in = want_input && !grads.empty() ? grads[0] : torch::Tensor();
    if (!s.grad_in.defined()) s.grad_in = torch::zeros_like(s.input);
  }
  s.layer_outputs.clear();  // the roots keep what W needs
  s.output = torch::Tensor();
  s.loss = torch::Tensor();
}

void StageWorker::WeightGrad(int mb) {
  auto it = slots_.find(mb);
  DAPPLE_CHECK(it != slots_.end() && !it->second.w_roots.empty(), "W before its I");
  Slot& s = it->second;
  // From the last layer down, the order in which a whole backward would produce them, so
  // the allreduce buckets fill in the order they are launched.
  for (int i = static_cast<int>(s.w_roots.size()) - 1; i >= 0; --i) {
    if (!s.w_roots[i].defined()) continue;
    std::vector<torch::Tensor> params;
    for (const torch::Tensor& p : model_.Parameters(first_ + i, first_ + i))
      if (p.requires_grad()) params.push_back(p);
    if (params.empty()) continue;
    std::vector<torch::Tensor> grads;
    if (s.w_grads[i].defined()) grads.push_back(s.w_grads[i]);
    // The graph is kept: the layers' roots share the history below them; it goes with
    // the slot.
    torch::autograd::backward({s.w_roots[i]}, grads, /*retain_graph=*/true,
                              /*create_graph=*/false, params);
  }
  AddLive(-s.live_bytes, -1);
  slots_.erase(it);
}

}  // namespace dapple
