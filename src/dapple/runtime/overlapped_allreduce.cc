// Overlapped bucketed gradient allreduce: see overlapped_allreduce.h.
//
// Note [Why pre-accumulation hooks]: libtorch 1.13 has no post-accumulate-grad hook; a
// leaf's tensor hook runs just before AccumulateGrad adds the new gradient to .grad. So
// the hook writes (.grad + new) itself into the bucket: the very sum AccumulateGrad is
// about to store. Finish overwrites .grad with the reduced value afterwards.
#include "dapple/runtime/overlapped_allreduce.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "dapple/common/error.h"

namespace dapple {
namespace {

double NowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

OverlappedAllReduce::OverlappedAllReduce(Communicator& comm, std::string group,
                                         std::vector<std::vector<torch::Tensor>> layer_params,
                                         int first, int64_t bucket_bytes)
    : comm_(comm), group_(std::move(group)) {
  DAPPLE_CHECK(!layer_params.empty() && bucket_bytes > 0);
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
    std::map<c10::ScalarType, int> part_of;
    for (int l = buckets_[b].last_layer; l >= buckets_[b].first_layer; --l) {
      for (const auto& p : layer_params[l - first]) {
        if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
        auto [it, fresh] = part_of.emplace(p.scalar_type(), state_[b].parts.size());
        if (fresh) state_[b].parts.emplace_back();
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
      const int64_t n = part.offset.back() + params_[part.params.back()].numel();
      part.flat = torch::zeros({n}, params_[part.params[0]].options().requires_grad(false));
    }
  }
  arrived_.assign(params_.size(), false);
  hooks_.assign(params_.size(), 0);
}

OverlappedAllReduce::~OverlappedAllReduce() { Unhook(); }

void OverlappedAllReduce::Unhook() {
  if (!armed_) return;
  for (size_t i = 0; i < params_.size(); ++i) params_[i].remove_hook(hooks_[i]);
  armed_ = false;
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
  for (size_t i = 0; i < params_.size(); ++i) {
    const int index = static_cast<int>(i);
    // Captures `this`, not the tensor: a tensor capturing itself would never be freed.
    hooks_[i] = params_[i].register_hook([this, index](torch::Tensor g) { Arrived(index, g); });
  }
  armed_ = true;
  LaunchReady();  // buckets without parameters
}

void OverlappedAllReduce::Arrived(int param, const torch::Tensor& grad) {
  if (arrived_[param]) return;  // defensive: a second call would double-count
  arrived_[param] = true;
  torch::NoGradGuard no_grad;
  auto [p, k] = slot_of_[param];
  Bucket& bk = state_[bucket_of_[param]];
  Part& part = bk.parts[p];
  const torch::Tensor& acc = params_[param].grad();
  torch::Tensor dst = part.flat.narrow(0, part.offset[k], params_[param].numel());
  if (acc.defined() && grad.defined()) {
    dst.copy_((acc + grad).reshape({-1}));
  } else if (grad.defined() || acc.defined()) {
    dst.copy_((grad.defined() ? grad : acc).reshape({-1}));
  } else {
    dst.zero_();
  }
  --bk.waiting;
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
    bk.parts[p].work =
        comm_.AllReduceSumAsync(bk.parts[p].flat, group_,
                                fmt::format("{} (bucket {}, layers {}-{})", what_, b,
                                            buckets_[b].first_layer, buckets_[b].last_layer));
  }
}

std::vector<TimelineEvent> OverlappedAllReduce::Finish(std::chrono::milliseconds timeout, int track,
                                                       int stage, int64_t* bytes) {
  DAPPLE_CHECK(armed_, "allreduce finished without being armed");
  Unhook();
  torch::NoGradGuard no_grad;
  // Parameters the backward never reached: their accumulated gradient, or zeros.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (arrived_[i]) continue;
    arrived_[i] = true;
    auto [p, k] = slot_of_[i];
    Bucket& bk = state_[bucket_of_[i]];
    DAPPLE_CHECK(!bk.launched, "a bucket was launched before all its gradients arrived");
    Part& part = bk.parts[p];
    torch::Tensor dst = part.flat.narrow(0, part.offset[k], params_[i].numel());
    const torch::Tensor& acc = params_[i].grad();
    if (acc.defined()) {
      dst.copy_(acc.reshape({-1}));
    } else {
      dst.zero_();
    }
    --bk.waiting;
  }
  LaunchReady();
  DAPPLE_CHECK(next_launch_ == static_cast<int>(state_.size()), "a bucket was never launched");
  std::vector<TimelineEvent> events;
  int64_t total = 0;
  for (int b = 0; b < static_cast<int>(state_.size()); ++b) {
    Bucket& bk = state_[b];
    for (Part& part : bk.parts) {
      part.work.Wait(timeout);
      part.work = CommWork();
      total += part.flat.numel() * static_cast<int64_t>(part.flat.element_size());
      for (size_t k = 0; k < part.params.size(); ++k) {
        torch::Tensor& param = params_[part.params[k]];
        torch::Tensor sum = part.flat.narrow(0, part.offset[k], param.numel()).view_as(param);
        if (param.mutable_grad().defined()) {
          param.mutable_grad().copy_(sum);
        } else {
          param.mutable_grad() = sum.clone();
        }
      }
    }
    events.push_back(
        {track, "AR b" + std::to_string(b), "allreduce", bk.launch_ms, NowMs(), stage, -1});
  }
  if (bytes) *bytes = total;
  return events;
}

}  // namespace dapple
