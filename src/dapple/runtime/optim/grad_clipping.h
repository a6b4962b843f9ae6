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

#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/rank_grid.h"
#include "dapple/runtime/comm/tied_parameters.h"

namespace dapple {

class GradClipper {
 public:
  // Training rank `rank` of `grid`, which updates `params` (each once); `tied`: its stage's
  // parameters shared with other stages (null: none). Creates the group of every training
  // rank (collective over them). max_norm may be infinite (the norm is reported, nothing
  // is scaled).
  GradClipper(double max_norm, std::vector<torch::Tensor> params, const RankGrid& grid, int rank,
              const TiedParameters* tied, Communicator& comm);
  // Computes the global norm (collective over the training ranks; blocking), scales the
  // gradients by min(1, max_norm / (norm + 1e-6)) and returns the norm. Parameters without
  // a gradient are left out, as clip_grad_norm_ leaves them.
  double Clip(const std::string& what);
  // A stage that shards its optimizer (Note [Optimizer sharding]): the reduced gradients of
  // `sharded` are in `shards` only, one shard per replica. Counts and scales the shards, on
  // every replica, instead of those parameters.
  void UseShards(const std::vector<torch::Tensor>& sharded,
                 const std::vector<torch::Tensor>& shards);
  // The last norm on the rank that reports it (stage 0's replica 0), 0 on the others: a part
  // of a sum over ranks that is the norm (Note [Loss off the critical path]).
  double ReportedPart() const { return reports_ ? last_norm_ : 0; }

 private:
  double max_norm_;
  std::vector<torch::Tensor> params_;
  std::vector<bool> counted_;  // whether params_[i] adds to the norm here
  Communicator& comm_;
  bool reports_;
  double last_norm_ = 0;
};

}  // namespace dapple
