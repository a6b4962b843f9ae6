// GradClipper: see Note [Global gradient clipping] in grad_clipping.h.
#include "dapple/runtime/grad_clipping.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "dapple/common/error.h"

namespace dapple {

GradClipper::GradClipper(double max_norm, std::vector<torch::Tensor> params,
                         std::vector<bool> counted, Communicator& comm, std::string group)
    : max_norm_(max_norm),
      params_(std::move(params)),
      counted_(std::move(counted)),
      comm_(comm),
      group_(std::move(group)) {
  DAPPLE_CHECK(params_.size() == counted_.size());
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
  comm_.AllReduceSum(sum, group_, what);
  last_norm_ = std::sqrt(sum.item<double>());
  const double coef = std::min(1.0, max_norm_ / (last_norm_ + 1e-6));
  for (auto& p : params_) {
    if (p.grad().defined()) p.mutable_grad().mul_(coef);
  }
  return last_norm_;
}

}  // namespace dapple
