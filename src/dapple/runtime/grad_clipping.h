// Global gradient-norm clipping over a pipeline (`dapple train --clip-grad-norm X`).
//
// Note [Global gradient clipping]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch.nn.utils.clip_grad_norm_ on one device scales every gradient by
// min(1, X / (norm + 1e-6)), where norm is the 2-norm of all the model's gradients together.
// In a pipeline no rank holds them all, and clipping each stage by its own norm is wrong
// (the stages would take steps of different relative sizes). Once a step's gradients are
// complete (after each stage's replica allreduce and the tied parameters' sums, Note [Tied
// parameters]), every replica of a stage holds the same gradients and every stage that
// uses a tied parameter the same copy of its gradient. So each rank adds up the squared
// norms of the gradients it counts: replica 0 of each stage only, and a tied parameter only
// on the first stage that uses it, so that each parameter of the model counts once. One
// scalar allreduce over the ranks that train sums them; every rank then scales its own
// gradients by the same factor. It is one small collective per step on the critical path:
// the optimizer step of every stage waits for the last stage's gradients.
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "dapple/runtime/communicator.h"

namespace dapple {

class GradClipper {
 public:
  // `params`: every parameter this rank updates, each once; `counted[i]`: whether params[i]
  // adds to the norm here. `group`: the communicator group of every rank that trains.
  // max_norm may be infinite (the norm is reported, nothing is scaled).
  GradClipper(double max_norm, std::vector<torch::Tensor> params, std::vector<bool> counted,
              Communicator& comm, std::string group);
  // Computes the global norm (collective over the group; blocking), scales the gradients
  // by min(1, max_norm / (norm + 1e-6)) and returns the norm. Parameters without a gradient
  // are left out, as clip_grad_norm_ leaves them.
  double Clip(const std::string& what);
  double last_norm() const { return last_norm_; }

 private:
  double max_norm_;
  std::vector<torch::Tensor> params_;
  std::vector<bool> counted_;
  Communicator& comm_;
  std::string group_;
  double last_norm_ = 0;
};

}  // namespace dapple
