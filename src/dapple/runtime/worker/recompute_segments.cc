// Re-computation in the stage worker, whole stage or per layer, with the whole backward (B)
// and with the split one (I, then W).
//
// Note [Re-computation per layer]
// A plan stage lists the layers that re-compute (`recompute_layers`; `recompute` means all
// of them). The worker cuts its layers into blocks, maximal runs of layers that all
// re-compute or all do not. F runs the blocks in order; a block's input after the first is
// a leaf (its producer's output, detached), so autograd stops at every block boundary. A
// block that re-computes runs without a graph and keeps only its input; the others keep
// their outputs with their graphs. A run of consecutive re-computing layers is one block,
// so it keeps one input, the first layer's; its output is the next block's input, which
// that block keeps, so a re-computing block frees its layers' outputs but its last's unless
// it ends the stage (re-computing one layer in the middle of a stage frees nothing). The
// simulator and the planner count the same (cost/recompute_costs.h), and the measured
// peaks match them (docs/runtime.md, "Re-computation").
// B walks the blocks from the last down: a re-computing block runs its forward again from
// its input, with a graph, right before its own backward; each block's backward starts from
// its output with the gradient its successor's input leaf received, so the blocks compose
// into the whole backward and the weight gradients accumulate as one backward's would. One
// rebuilt block is alive at a time (the simulator's `rebuilt_peak`).
// Split backward (zb-h1, zb-v, ...): I walks the blocks the same way, rebuilding each
// re-computing block with its layer outputs and taking the gradients with respect to the
// block's input and its layer outputs (Note [Splitting the backward at layer outputs]); the
// rebuilt graphs stay with the micro-batch until its W, which runs from those layer outputs
// as without re-computation. So re-computation saves memory from F to I only, and the
// simulator holds the rebuilt activations from I to W (RecomputeBytes::rebuilt).
#include <torch/autograd.h>

#include <algorithm>

#include "dapple/common/error.h"
#include "dapple/runtime/worker/boundary.h"
#include "dapple/runtime/worker/stage_worker.h"

namespace dapple {
namespace {

// A block's input from its predecessor's output: detached, so autograd stops here. It
// carries a gradient where the output did, or, after a block run without a graph, where it
// is floating point (a gradient that turns out unused is never taken).
Activations Leaf(const Activations& x, bool after_recompute) {
  Activations out;
  for (const torch::Tensor& t : x) {
    const bool grad = after_recompute ? t.is_floating_point() : t.requires_grad();
    out.push_back(grad ? t.detach().requires_grad_(true) : t);
  }
  return out;
}

}  // namespace

std::vector<StageWorker::Block> StageWorker::MakeBlocks() const {
  std::vector<Block> blocks;
  for (int l = first_; l <= last_; ++l) {
    const std::vector<int>& some = opt_.recompute_layers;
    const bool r = opt_.recompute || std::find(some.begin(), some.end(), l) != some.end();
    if (!blocks.empty() && blocks.back().recompute == r)
      blocks.back().last = l;
    else
      blocks.push_back({l, l, r});
  }
  return blocks;
}

Activations StageWorker::RunBlock(Activations x, const Block& b, int64_t* saved_bytes,
                                  std::vector<Activations>* layer_outputs) {
  *saved_bytes = 0;
  // The stage's input arrives as sent (Note [Mixed precision]: bf16 on the wire) and is kept
  // so; the first block casts it, inside its graph when it has one, as RunLayers does.
  if (b.first == first_) x = FromWire(std::move(x), in_spec_, in_all_);
  for (int l = b.first; l <= b.last; ++l) {
    x = model_.ForwardActivations(x, l, l);
    *saved_bytes += Bytes(x);
    if (layer_outputs) (*layer_outputs)[l - first_] = x;
  }
  return x;
}

torch::Tensor StageWorker::ScaledLoss(const Activations& out, int mb) {
  const int64_t n = my_rows_.size(), begin = mb * opt_.micro_batch + my_rows_.begin;
  torch::Tensor target = batch_->targets.narrow(0, begin, n).to(device_);
  return model_.loss(out.at(0), target) *
         (static_cast<double>(n) / static_cast<double>(opt_.global_batch));
}

void StageWorker::OutputRoots(const Activations& out, const Activations& received,
                              Activations& roots, Activations& grads) const {
  size_t k = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out_grad_[i]) continue;
    if (out[i].requires_grad()) {
      roots.push_back(out[i]);
      grads.push_back(received.at(k));
    }
    ++k;
  }
}

Activations StageWorker::ForwardBlocks(Slot& s) {
  Activations x = s.input;
  int64_t kept = Bytes(s.input);
  s.block_inputs.clear();
  s.block_outputs.clear();
  if (split_) s.layer_outputs.assign(last_ - first_ + 1, Activations());
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const Block& block = blocks_[b];
    if (b > 0) x = Leaf(x, blocks_[b - 1].recompute);
    if (b > 0 && blocks_[b - 1].recompute) kept += Bytes(x);  // held as this block's input
    s.block_inputs.push_back(x);
    int64_t saved = 0;
    if (block.recompute) {
      torch::NoGradGuard no_grad;
      x = RunBlock(x, block, &saved, nullptr);
      AddLive(saved, 0);  // transient: the block's forward once
      AddLive(-saved, 0);
      s.block_outputs.emplace_back();
    } else {
      x = RunBlock(x, block, &saved, split_ ? &s.layer_outputs : nullptr);
      kept += saved;
      s.block_outputs.push_back(x);
    }
  }
  s.live_bytes = kept;
  return x;
}

Activations StageWorker::RebuildBlock(Slot& s, int b, std::vector<Activations>* layer_outputs) {
  int64_t rebuilt = 0;
  Activations y = RunBlock(s.block_inputs[b], blocks_[b], &rebuilt, layer_outputs);
  AddLive(rebuilt, 0);
  if (split_) s.live_bytes += rebuilt;  // held until W
  return y;
}

void StageWorker::BlockRoots(Slot& s, int b, int mb, const Activations& y,
                             const Activations& received, const Activations& above,
                             Activations& roots, Activations& grads) {
  if (b + 1 < static_cast<int>(blocks_.size())) {
    for (size_t i = 0; i < y.size(); ++i) {
      if (!y[i].requires_grad() || !above[i].defined()) continue;
      roots.push_back(y[i]);
      grads.push_back(above[i]);
    }
  } else if (stage_ + 1 == grid_.num_virtual_stages()) {
    roots.push_back(blocks_[b].recompute ? ScaledLoss(y, mb) : s.loss);
  } else {
    OutputRoots(y, received, roots, grads);
  }
}

void StageWorker::BackwardBlocks(Slot& s, int mb) {
  const bool last = stage_ + 1 == grid_.num_virtual_stages();
  Activations received;
  if (!last) received = TakeReceived(Op::kRecvGrad, mb);
  for (int b = static_cast<int>(blocks_.size()) - 1; b >= 0; --b) {
    const Block& block = blocks_[b];
    const int64_t live_before = live_bytes_;
    Activations y = block.recompute ? RebuildBlock(s, b, nullptr) : s.block_outputs[b];
    Activations above;  // what the next block's input leaves received
    for (size_t i = 0; b + 1 < static_cast<int>(blocks_.size()) && i < y.size(); ++i) {
      const torch::Tensor& next = s.block_inputs[b + 1][i];
      above.push_back(next.requires_grad() ? next.grad() : torch::Tensor());
    }
    Activations roots, grads;
    BlockRoots(s, b, mb, y, received, above, roots, grads);
    if (!roots.empty() && roots[0].requires_grad()) torch::autograd::backward(roots, grads);
    s.block_outputs[b].clear();
    AddLive(live_before - live_bytes_, 0);  // the rebuilt block goes with its backward
  }
}

void StageWorker::InputGradBlocks(Slot& s, int mb) {
  const bool last = stage_ + 1 == grid_.num_virtual_stages();
  const int n = last_ - first_ + 1;
  Activations received;
  if (!last) received = TakeReceived(Op::kRecvGrad, mb);
  s.w_roots.assign(n, Activations());
  s.w_grads.assign(n, Activations());
  Activations above;  // the gradients with respect to the input of block b + 1
  for (int b = static_cast<int>(blocks_.size()) - 1; b >= 0; --b) {
    const Block& block = blocks_[b];
    Activations y = block.recompute ? RebuildBlock(s, b, &s.layer_outputs) : s.block_outputs[b];
    Activations roots, grads;
    BlockRoots(s, b, mb, y, received, above, roots, grads);
    InputGradBlock(s, b, std::move(roots), std::move(grads), &above);
  }
  if (stage_ > 0) {
    s.grad_in.clear();
    for (size_t i = 0; i < s.input.size(); ++i) {
      if (!in_grad_[i]) continue;
      const torch::Tensor& g = above[i];
      s.grad_in.push_back(g.defined() ? g : torch::zeros_like(s.input[i]));
    }
  }
  s.layer_outputs.clear();  // the roots keep what W needs
  s.block_outputs.clear();
  s.output.clear();
  s.loss = torch::Tensor();
}

void StageWorker::InputGradBlock(Slot& s, int b, Activations roots, Activations root_grads,
                                 Activations* input_grads) {
  const Block& block = blocks_[b];
  const Activations& input = s.block_inputs[b];
  const bool has_root = !roots.empty() && roots[0].requires_grad();
  // With respect to: the block's inputs that carry a gradient (on the first block, those
  // the previous stage waits for), then the outputs of its layers but the last.
  std::vector<torch::Tensor> wrt;
  std::vector<int> input_of;
  for (size_t i = 0; i < input.size(); ++i) {
    const bool wanted = b > 0 || (stage_ > 0 && in_grad_[i]);
    if (wanted && input[i].requires_grad()) {
      wrt.push_back(input[i]);
      input_of.push_back(static_cast<int>(i));
    }
  }
  std::vector<std::pair<int, int>> output_of;  // (layer in the stage, tensor)
  for (int l = block.first; l < block.last; ++l) {
    const Activations& out = s.layer_outputs[l - first_];
    for (size_t t = 0; t < out.size(); ++t) {
      if (!out[t].requires_grad()) continue;
      wrt.push_back(out[t]);
      output_of.push_back({l - first_, static_cast<int>(t)});
    }
  }
  std::vector<torch::Tensor> grads;
  if (has_root && !wrt.empty())
    grads = torch::autograd::grad(roots, wrt, root_grads, /*retain_graph=*/true,
                                  /*create_graph=*/false, /*allow_unused=*/true);
  if (has_root) {
    s.w_roots[block.last - first_] = roots;
    s.w_grads[block.last - first_] = root_grads;
  }
  for (size_t k = 0; k < output_of.size() && !grads.empty(); ++k) {
    const torch::Tensor& g = grads[input_of.size() + k];
    if (!g.defined()) continue;
    auto [l, t] = output_of[k];
    s.w_roots[l].push_back(s.layer_outputs[l][t]);
    s.w_grads[l].push_back(g);
  }
  input_grads->assign(input.size(), torch::Tensor());
  for (size_t k = 0; k < input_of.size() && !grads.empty(); ++k)
    (*input_grads)[input_of[k]] = grads[k];
}

}  // namespace dapple
