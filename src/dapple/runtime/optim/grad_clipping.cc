// GradClipper: see Note [Global gradient clipping] in grad_clipping.h.
#include "dapple/runtime/optim/grad_clipping.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace dapple {
namespace {

constexpr const char* kNormGroup = "grad_norm";

}  // namespace

GradClipper::GradClipper(double max_norm, std::vector<torch::Tensor> params, const RankGrid& grid,
                         int rank, const TiedParameters* tied, Communicator& comm)
    : max_norm_(max_norm),
      params_(std::move(params)),
      comm_(comm),
      reports_(rank == grid.RanksOf(0).front()) {
  const bool first_replica = grid.Of(rank).replica == 0;
  for (const auto& p : params_)
    counted_.push_back(first_replica && !(tied && tied->CountedOnEarlierStage(p)));
  std::vector<int> training;
  for (int s = 0; s < grid.num_stages(); ++s)
    for (int r : grid.RanksOf(s)) training.push_back(r);
  std::sort(training.begin(), training.end());
  comm_.CreateGroup(kNormGroup, training);
}

void GradClipper::UseShards(const std::vector<torch::Tensor>& sharded,
                            const std::vector<torch::Tensor>& shards) {
  std::set<const void*> gone;
  for (const auto& p : sharded) gone.insert(p.unsafeGetTensorImpl());
  std::vector<torch::Tensor> params;
  std::vector<bool> counted;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (gone.count(params_[i].unsafeGetTensorImpl())) continue;
    params.push_back(params_[i]);
    counted.push_back(counted_[i]);
  }
  for (const auto& s : shards) {
    params.push_back(s);
    counted.push_back(true);
  }
  params_ = std::move(params);
  counted_ = std::move(counted);
}

double GradClipper::Clip(const std::string& what) {
  // clip_grad_norm_'s norm of the per-tensor norms, its squares summed across ranks.
  std::vector<torch::Tensor> norms;
  for (size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& g = params_[i].grad();
    if (counted_[i] && g.defined()) norms.push_back(g.detach().norm(2).to(torch::kFloat64));
  }
  torch::Tensor sum = norms.empty() ? torch::zeros({1}, torch::kFloat64)
                                    : torch::stack(norms).square().sum().reshape({1}).cpu();
  comm_.AllReduceSum(sum, kNormGroup, what);
  last_norm_ = std::sqrt(sum.item<double>());
  const double coef = std::min(1.0, max_norm_ / (last_norm_ + 1e-6));
  for (auto& p : params_) {
    if (p.grad().defined()) p.mutable_grad().mul_(coef);
  }
  return last_norm_;
}

}  // namespace dapple
