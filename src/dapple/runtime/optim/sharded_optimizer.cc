// ShardedOptimizer: see Note [Optimizer sharding] in sharded_optimizer.h.
#include "dapple/runtime/optim/sharded_optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "dapple/common/clock.h"
#include "dapple/common/error.h"

namespace dapple {
namespace {

// A plain tensor on `flat`'s storage from element `offset` with `sizes` (set_, not an
// autograd view: zero_grad's detach_ rejects views).
torch::Tensor StorageAlias(const torch::Tensor& flat, int64_t offset, torch::IntArrayRef sizes) {
  torch::Tensor alias = torch::empty({0}, flat.options().requires_grad(false));
  alias.set_(flat.storage(), flat.storage_offset() + offset, sizes);
  return alias;
}

}  // namespace

std::vector<std::vector<torch::Tensor>> BucketedLayerParams(const Model& model, int first, int last,
                                                            const TiedParameters* tied) {
  std::vector<std::vector<torch::Tensor>> layer_params;
  std::set<const void*> seen;
  for (int l = first; l <= last; ++l) {
    layer_params.emplace_back();
    for (const auto& p : model.Parameters(l, l)) {
      if (tied && tied->Contains(p)) continue;
      if (seen.insert(p.unsafeGetTensorImpl()).second) layer_params.back().push_back(p);
    }
  }
  return layer_params;
}

ShardedOptimizer::ShardedOptimizer(const OptimizerOptions& options, Communicator& comm,
                                   std::string group, int replica, int replicas,
                                   std::vector<std::vector<torch::Tensor>> layer_params, int first,
                                   int64_t bucket_bytes,
                                   const std::vector<torch::Tensor>& all_params)
    : comm_(comm),
      group_(std::move(group)),
      replica_(replica),
      replicas_(replicas),
      kind_(options.kind) {
  DAPPLE_CHECK(replicas >= 2 && replica >= 0 && replica < replicas);
  buckets_ = std::make_unique<OverlappedAllReduce>(
      comm, group_, std::move(layer_params), first, bucket_bytes,
      GradShards{replicas, replica, options.no_decay_on_norm_and_bias});
  parts_ = buckets_->Parts();
  std::vector<torch::Tensor> stepped;
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < parts_.size(); ++k) {
    const GradPart& part = parts_[k];
    torch::Tensor flat = torch::zeros_like(part.flat);
    for (size_t i = 0; i < part.params.size(); ++i) {
      torch::Tensor p = part.params[i];  // shares the module's TensorImpl
      flat.narrow(0, part.offset[i], p.numel()).copy_(p.reshape(-1));
      p.set_(flat.storage(), flat.storage_offset() + part.offset[i], p.sizes());
      places_[p.unsafeGetTensorImpl()] = {static_cast<int>(k), part.offset[i]};
    }
    const int64_t c = flat.numel() / replicas_;
    std::vector<int64_t> sizes = part.matrices ? std::vector<int64_t>{1, c} : std::vector{c};
    torch::Tensor shard = StorageAlias(flat, replica_ * c, sizes);
    shard.mutable_grad() = StorageAlias(part.flat, replica_ * c, sizes);
    param_flats_.push_back(flat);
    shards_.push_back(shard);
    stepped.push_back(shard);
  }
  for (const auto& p : all_params)
    if (!places_.count(p.unsafeGetTensorImpl())) stepped.push_back(p);
  optimizer_ = MakeOptimizer(options, stepped);
}

std::vector<torch::Tensor> ShardedOptimizer::ShardedParameters() const {
  std::vector<torch::Tensor> params;
  for (const GradPart& part : parts_)
    params.insert(params.end(), part.params.begin(), part.params.end());
  return params;
}

std::pair<double, double> ShardedOptimizer::Step(const std::string& what,
                                                 std::chrono::milliseconds timeout) {
  optimizer_->step();
  const double start = NowMs();
  // A ring all-gather in place (Note [Optimizer sharding]): at step t of r - 1, replica k
  // sends shard (k - t) mod r of each part to replica k + 1 and receives shard (k - t - 1)
  // mod r from replica k - 1 into its place in the parameter buffer.
  const Deadline deadline(timeout);  // Note [One deadline per wait chain]
  const int next = (replica_ + 1) % replicas_, prev = (replica_ + replicas_ - 1) % replicas_;
  for (size_t k = 0; k < param_flats_.size(); ++k) {
    const torch::Tensor& flat = param_flats_[k];
    const int64_t c = flat.numel() / replicas_;
    for (int t = 0; t + 1 < replicas_; ++t) {
      const int sent = (replica_ - t + replicas_) % replicas_;
      const int got = (replica_ - t - 1 + 2 * replicas_) % replicas_;
      const uint32_t tag = static_cast<uint32_t>(k * replicas_ + t);
      const std::string step = fmt::format("{} (part {}, ring step {})", what, k, t);
      CommWork send = comm_.SendInGroup(flat.narrow(0, sent * c, c), group_, next, tag, step);
      CommWork recv = comm_.RecvInGroup(flat.narrow(0, got * c, c), group_, prev, tag, step);
      send.Wait(deadline);
      recv.Wait(deadline);
    }
  }
  const double end = NowMs();
  optimizer_->zero_grad(/*set_to_none=*/false);  // the shards' and the others' gradients, in place
  for (const GradPart& part : parts_) part.flat.zero_();
  return {start, end};
}

std::tuple<int64_t, int64_t, int64_t> ShardedOptimizer::Overlap(const Place& at,
                                                                int64_t numel) const {
  const int64_t c = param_flats_[at.part].numel() / replicas_;
  const int64_t lo = std::max(at.offset, replica_ * c);
  const int64_t hi = std::min(at.offset + numel, (replica_ + 1) * c);
  if (hi <= lo) return {0, 0, 0};
  return {lo - at.offset, lo - replica_ * c, hi - lo};
}

std::map<std::string, torch::Tensor> ShardedOptimizer::Export(const torch::Tensor& p) {
  auto it = places_.find(p.unsafeGetTensorImpl());
  if (it == places_.end()) return ExportParamState(*optimizer_, kind_, p);
  const auto [in_param, in_shard, n] = Overlap(it->second, p.numel());
  std::map<std::string, torch::Tensor> out;
  // The same fields on every replica: the shards step together.
  for (const auto& [field, t] : ExportParamState(*optimizer_, kind_, shards_[it->second.part])) {
    if (field == "step") {
      out[field] = t.clone();
      continue;
    }
    torch::Tensor whole = torch::zeros({p.numel()}, t.options());
    if (n > 0) whole.narrow(0, in_param, n).copy_(t.reshape(-1).narrow(0, in_shard, n));
    comm_.AllReduceSum(
        whole, group_,
        fmt::format("replica {}: assembling the optimizer state for a checkpoint", replica_));
    out[field] = whole.view(p.sizes());
  }
  return out;
}

void ShardedOptimizer::Import(const torch::Tensor& p,
                              const std::map<std::string, torch::Tensor>& state) {
  auto it = places_.find(p.unsafeGetTensorImpl());
  if (it == places_.end()) return ImportParamState(*optimizer_, kind_, p, state);
  const torch::Tensor& shard = shards_[it->second.part];
  if (state.empty()) return ImportParamState(*optimizer_, kind_, shard, {});
  auto held = ExportParamState(*optimizer_, kind_, shard);
  if (held.empty()) {  // the shard's first piece: zeros (padding stays zero), the step count
    for (const auto& [field, t] : state)
      held[field] = field == "step" ? t : torch::zeros(shard.sizes(), t.options());
    ImportParamState(*optimizer_, kind_, shard, held);
    held = ExportParamState(*optimizer_, kind_, shard);  // the installed tensors
  }
  const auto [in_param, in_shard, n] = Overlap(it->second, p.numel());
  if (n == 0) return;
  torch::NoGradGuard no_grad;
  for (const auto& [field, t] : state) {
    if (field == "step") continue;
    held.at(field).reshape(-1).narrow(0, in_shard, n).copy_(t.reshape(-1).narrow(0, in_param, n));
  }
}

}  // namespace dapple
