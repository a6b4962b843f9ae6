// Parameters shared by layers of different stages (tied weights).
//
// Note [Tied parameters]: a language model whose output head reuses the embedding matrix has
// one parameter in two layers. In one process it is one tensor, and autograd adds both
// uses' gradients. When the two layers land on different stages each stage holds its own
// copy; dapple keeps them one parameter as Megatron does for tied embeddings: every rank
// of every stage that uses it joins one group, the parameter stays out of its stage's own
// allreduce, and before the optimizer step its gradient is summed over that group. Each
// rank's gradient is its slice's share of the global batch's mean loss, so the sum is the
// whole gradient; every copy starts from the same file and takes the same update, so the
// copies stay identical.
#pragma once

#include <torch/types.h>

#include <set>
#include <string>
#include <vector>

#include "dapple/format/plan.h"
#include "dapple/models/model.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/rank_grid.h"

namespace dapple {

class TiedParameters {
 public:
  // The shared parameters of `model` that stage `stage` (its layers held here)
  // uses and whose uses span more than one stage of `grid`. Creates one group per such
  // parameter (collective over its members, in model order).
  TiedParameters(const Model& model, const Plan& plan, const RankGrid& grid, int stage,
                 Communicator& comm);
  // Whether `p` is one of them (to leave out of the stage's allreduce).
  bool Contains(const torch::Tensor& p) const;
  // Whether `p` is one of them and a stage before this one also holds it: its gradient
  // counts in the global norm there, not here (Note [Global gradient clipping]).
  bool CountedOnEarlierStage(const torch::Tensor& p) const;
  // Sums the gradients over each group (blocking). Call before the optimizer step.
  void AllReduceGradients(const std::string& what);
  bool empty() const { return tied_.empty(); }

 private:
  struct Tied {
    torch::Tensor param;
    std::string group;
  };
  Communicator& comm_;
  std::vector<Tied> tied_;
  std::set<const void*> impls_;
  std::set<const void*> later_copies_;  // held first by an earlier stage
};

}  // namespace dapple
