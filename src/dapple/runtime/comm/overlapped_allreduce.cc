// Overlapped bucketed gradient allreduce: see overlapped_allreduce.h.
//
// Note [Why hooks on AccumulateGrad]: libtorch 1.13 has no post-accumulate-grad tensor
// hook; a leaf's tensor hook runs before AccumulateGrad, and copying (.grad + new) into the
// bucket there cost more than the layer's backward on CPU. A post hook on the leaf's
// AccumulateGrad node (what DDP's reducer uses) runs once the sum is in .grad, which is
// already the bucket slot (Note [Gradients are bucket views]).
#include "dapple/runtime/comm/overlapped_allreduce.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <map>
#include <set>

#include "dapple/common/clock.h"
#include "dapple/common/error.h"

namespace dapple {
namespace {

// Calls back once AccumulateGrad has added a micro-batch's gradient to .grad.
class AccumulatedHook final : public torch::autograd::FunctionPostHook {
 public:
  explicit AccumulatedHook(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

}  // namespace

OverlappedAllReduce::OverlappedAllReduce(Communicator& comm, std::string group,
                                         std::vector<std::vector<torch::Tensor>> layer_params,
                                         int first, int64_t bucket_bytes, GradShards shards)
    : comm_(comm), group_(std::move(group)), shards_(shards) {
  DAPPLE_CHECK(!layer_params.empty() && bucket_bytes > 0 && shards.count >= 1 &&
               shards.index >= 0 && shards.index < shards.count);
  std::vector<double> layer_bytes;
  for (const auto& ps : layer_params) {
    double b = 0;
    for (const auto& p : ps) b += static_cast<double>(p.numel() * p.element_size());
    layer_bytes.push_back(b);
  }
  buckets_ = GroupGradientBuckets(layer_bytes, first, static_cast<double>(bucket_bytes));
  state_.resize(buckets_.size());
  // A parameter shared by several layers belongs to the first bucket that meets it.
  std::set<const void*> seen;
  for (int b = 0; b < static_cast<int>(buckets_.size()); ++b) {
    std::map<std::pair<c10::ScalarType, bool>, int> part_of;
    for (int l = buckets_[b].last_layer; l >= buckets_[b].first_layer; --l) {
      for (const auto& p : layer_params[l - first]) {
        if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
        const bool matrix = shards_.split_matrices && p.dim() >= 2;
        auto [it, fresh] = part_of.emplace(std::pair{p.scalar_type(), matrix},
                                           static_cast<int>(state_[b].parts.size()));
        if (fresh) {
          state_[b].parts.emplace_back();
          state_[b].parts.back().matrices = matrix;
        }
        Part& part = state_[b].parts[it->second];
        const int index = static_cast<int>(params_.size());
        params_.push_back(p);
        bucket_of_.push_back(b);
        slot_of_.push_back({it->second, static_cast<int>(part.params.size())});
        part.offset.push_back(
            part.params.empty() ? 0 : part.offset.back() + params_[part.params.back()].numel());
        part.params.push_back(index);
      }
    }
    for (Part& part : state_[b].parts) {
      int64_t n = part.offset.back() + params_[part.params.back()].numel();
      n = (n + shards_.count - 1) / shards_.count * shards_.count;  // equal shards
      part.flat = torch::zeros({n}, params_[part.params[0]].options().requires_grad(false));
    }
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto [p, k] = slot_of_[i];
    const Part& part = state_[bucket_of_[i]].parts[p];
    torch::Tensor& param = params_[i];
    // set_ makes a plain tensor on the bucket's storage (not an autograd view, which
    // zero_grad's detach_ would reject).
    torch::Tensor alias = torch::empty({0}, part.flat.options());
    alias.set_(part.flat.storage(), part.flat.storage_offset() + part.offset[k], param.sizes());
    if (param.grad().defined()) alias.copy_(param.grad());
    param.mutable_grad() = alias;
    accumulators_.push_back(torch::autograd::impl::grad_accumulator(param));
    DAPPLE_CHECK(accumulators_.back() != nullptr, "a parameter without a gradient accumulator");
    const int index = static_cast<int>(i);
    hooks_.push_back(accumulators_.back()->add_post_hook(
        std::make_unique<AccumulatedHook>([this, index] { Arrived(index); })));
  }
  arrived_.assign(params_.size(), false);
}

OverlappedAllReduce::~OverlappedAllReduce() { RemoveHooks(); }

void OverlappedAllReduce::RemoveHooks() {
  for (size_t i = 0; i < hooks_.size(); ++i) accumulators_[i]->del_post_hook(hooks_[i]);
  hooks_.clear();
}

void OverlappedAllReduce::Arm(const std::string& what) {
  DAPPLE_CHECK(!armed_, "allreduce hooks armed twice");
  what_ = what;
  next_launch_ = 0;
  arrived_.assign(params_.size(), false);
  for (size_t b = 0; b < state_.size(); ++b) {
    Bucket& bk = state_[b];
    bk.launched = false;
    bk.waiting = 0;
    for (const Part& part : bk.parts) bk.waiting += static_cast<int>(part.params.size());
  }
  armed_ = true;
  LaunchReady();  // buckets without parameters
}

void OverlappedAllReduce::Arrived(int param) {
  // Earlier micro-batches' backwards also reach the hook; only the armed one counts.
  if (!armed_ || arrived_[param]) return;
  arrived_[param] = true;
  DAPPLE_CHECK(params_[param].grad().data_ptr() != nullptr &&
                   params_[param].grad().storage().is_alias_of(
                       state_[bucket_of_[param]].parts[slot_of_[param].first].flat.storage()),
               "a parameter's gradient was reassigned (it must stay a view of its bucket)");
  --state_[bucket_of_[param]].waiting;
  LaunchReady();
}

void OverlappedAllReduce::LaunchReady() {
  while (next_launch_ < static_cast<int>(state_.size()) && state_[next_launch_].waiting == 0)
    Launch(next_launch_++);
}

void OverlappedAllReduce::Launch(int b) {
  Bucket& bk = state_[b];
  bk.launched = true;
  bk.launch_ms = NowMs();
  for (size_t p = 0; p < bk.parts.size(); ++p) {
    Part& part = bk.parts[p];
    std::string what = fmt::format("{} (bucket {}, layers {}-{})", what_, b,
                                   buckets_[b].first_layer, buckets_[b].last_layer);
    if (shards_.count > 1) {
      part.received = torch::empty_like(part.flat);
      part.work = comm_.AllToAllAsync(part.received, part.flat, group_, std::move(what));
    } else {
      part.work = comm_.AllReduceSumAsync(part.flat, group_, std::move(what));
    }
    part.work.RecordCompletion();  // the timeline's bucket ends when it completes
  }
}

std::vector<TimelineEvent> OverlappedAllReduce::Finish(std::chrono::milliseconds timeout, int track,
                                                       int stage, int64_t* bytes) {
  DAPPLE_CHECK(armed_, "allreduce finished without being armed");
  armed_ = false;
  // Parameters the backward never reached: their slot already holds what they have
  // accumulated (or the zeros zero_grad left).
  for (size_t i = 0; i < params_.size(); ++i) {
    if (arrived_[i]) continue;
    arrived_[i] = true;
    Bucket& bk = state_[bucket_of_[i]];
    DAPPLE_CHECK(!bk.launched, "a bucket was launched before all its gradients arrived");
    --bk.waiting;
  }
  LaunchReady();
  DAPPLE_CHECK(next_launch_ == static_cast<int>(state_.size()), "a bucket was never launched");
  std::vector<TimelineEvent> events;
  int64_t total = 0;
  const Deadline deadline(timeout);  // every bucket together (Note [One deadline per wait chain])
  for (int b = 0; b < static_cast<int>(state_.size()); ++b) {
    Bucket& bk = state_[b];
    double end = bk.launch_ms;  // when its last part completed
    for (Part& part : bk.parts) {
      part.work.Wait(deadline);
      const double done = part.work.CompletedMs();
      end = std::max(end, done >= 0 ? done : NowMs());
      part.work = CommWork();
      if (shards_.count > 1) SumReceived(part);
      total += part.flat.numel() * static_cast<int64_t>(part.flat.element_size());
    }
    events.push_back({track, (shards_.count > 1 ? "RS b" : "AR b") + std::to_string(b), "allreduce",
                      bk.launch_ms, end, stage, -1});
  }
  if (bytes) *bytes = total;
  return events;
}

void OverlappedAllReduce::SumReceived(Part& part) {
  // received holds every member's copy of this replica's shard, by sender: their sum in
  // sender order is the shard's reduced gradient (the rest of `flat` stays unreduced).
  const int64_t c = part.flat.numel() / shards_.count;
  part.flat.narrow(0, shards_.index * c, c).copy_(part.received.view({shards_.count, c}).sum(0));
  part.received = torch::Tensor();
}

std::vector<GradPart> OverlappedAllReduce::Parts() const {
  std::vector<GradPart> parts;
  for (const Bucket& bk : state_) {
    for (const Part& part : bk.parts) {
      GradPart g{part.flat, {}, part.offset, part.matrices};
      for (int i : part.params) g.params.push_back(params_[i]);
      parts.push_back(std::move(g));
    }
  }
  return parts;
}

}  // namespace dapple
