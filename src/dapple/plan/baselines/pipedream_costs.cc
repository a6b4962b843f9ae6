// PipeDream's DP's costs and caches: see pipedream_costs.h.
#include "dapple/plan/baselines/pipedream_costs.h"

#include <algorithm>
#include <span>
#include <utility>

#include "dapple/common/error.h"
#include "dapple/plan/dp/layer_blocks.h"
#include "dapple/plan/dp/placement.h"
#include "dapple/plan/plan_costs.h"

namespace dapple::internal {

// Note [PipeDream's caches]
// For each block end i the DP asks about every (first block ip, devices d after the stage,
// replica count n), and most answers repeat. These caches answer the repeats with the cost
// model's own figures:
// * With identical servers a stage's costs depend on its layers, its replica count and
//   where its device range starts inside a server, not on which server: stage_cache_ keeps
//   them per block end by (n, offset), a row by ip (forward < 0: not asked yet), so one
//   lookup per (d, n) serves every ip. A hash table: the replica counts are few, and a
//   dense table over the devices would be mostly empty and cleared per block.
// * On uniform devices only the allreduce depends on the devices beyond the first one's
//   kind (EvaluateStage costs one replica, and devices of one kind cost the same:
//   CostModel::DeviceKind), so the rest is kept by (n, kind of the first device) and the
//   allreduce by (n, offset), asked for every ip at once (CostModel::AllReduceMsFrom).
// * Transfers are kept by (n, next stage's n, offset) for every block end at once: asked
//   in a row with the same devices, the cost model sums them from one walk over the slices
//   (Note [Split-concat by link] in cost/split_concat.cc).
// * The replica counts by their bound, and per block a replica count's activation bytes by
//   ip, are asked once, not once per d; the devices are listed only when a cost is asked.
// Keys pack n << 40 | next n << 20 | offset: replica counts and offsets are below 2^20.

namespace {

uint64_t Key(int n, int next_n, int offset) {
  return static_cast<uint64_t>(n) << 40 | static_cast<uint64_t>(next_n) << 20 |
         static_cast<uint64_t>(offset);
}

}  // namespace

PipeDreamCosts::PipeDreamCosts(const CostModel& cost, const Cluster& cluster, int micro_batch,
                               const std::vector<int>& ends)
    : cost_(cost),
      ends_(ends),
      m_(micro_batch),
      num_blocks_(static_cast<int>(ends.size())),
      num_devices_(cluster.num_devices()),
      symmetric_(IdenticalServers(cluster)),
      uniform_(UniformDevices(cost)),
      block_firsts_(ends.size()),
      act_by_n_(std::min(num_devices_, micro_batch) + 1),
      counts_by_max_(std::min(num_devices_, micro_batch) + 1) {
  DAPPLE_CHECK(num_devices_ < (1 << 20), "PipeDream's planner: more than 2^20 devices");
  for (const ServerSpec& s : cluster.servers) server_size_ = std::max(server_size_, s.devices);
  for (int b = 0; b < num_blocks_; ++b) block_firsts_[b] = b == 0 ? 0 : ends[b - 1] + 1;
}

void PipeDreamCosts::StartBlock(int i) {
  i_ = i;
  stage_cache_.clear();
  allreduce_cache_.clear();
  for (int n : act_done_) act_by_n_[n].clear();
  act_done_.clear();
}

const std::vector<int>& PipeDreamCosts::Counts(int max_n) {
  if (counts_by_max_[max_n].empty()) counts_by_max_[max_n] = ReplicaCounts(max_n, server_size_);
  return counts_by_max_[max_n];
}

void PipeDreamCosts::StartStage(int d, int n, int next_n) {
  d_ = d;
  n_ = n;
  next_n_ = next_n;
  offset_ = (num_devices_ - d - n) % server_size_;
  listed_ = false;
  transfer_ms_ = AskTransfer();
  AskActivations();
  FindStageRow();
}

void PipeDreamCosts::ListDevices() {
  if (listed_) return;
  listed_ = true;
  const int D = num_devices_;
  devs_.clear();
  for (int x = D - d_ - n_; x < D - d_; ++x) devs_.push_back(x);
  to_.clear();
  if (d_ > 0)
    for (int x = D - d_; x < D - d_ + next_n_; ++x) to_.push_back(x);
}

double PipeDreamCosts::AskTransfer() {
  if (d_ == 0) return 0;
  if (!symmetric_) {
    ListDevices();
    return 2 * cost_.TransferMs(ends_[i_ - 1], m_, devs_, to_);
  }
  auto it = transfer_cache_.find(Key(n_, next_n_, offset_));
  if (it == transfer_cache_.end()) {
    ListDevices();
    std::vector<double> by_block(num_blocks_ + 1);
    for (int b = 1; b <= num_blocks_; ++b)
      by_block[b] = 2 * cost_.TransferMs(ends_[b - 1], m_, devs_, to_);
    it = transfer_cache_.emplace(Key(n_, next_n_, offset_), std::move(by_block)).first;
  }
  return it->second[i_];
}

void PipeDreamCosts::AskActivations() {
  std::vector<double>& act = act_by_n_[n_];
  act_ = &act;
  if (!act.empty()) return;
  const double samples = SamplesPerReplica(m_, n_);
  act.resize(i_);
  for (int ip = i_ - 1; ip >= 0; --ip)
    act[ip] = cost_.ActivationBytes(block_firsts_[ip], ends_[i_ - 1], samples);
  act_done_.push_back(n_);
}

void PipeDreamCosts::FindStageRow() {
  row_ = nullptr;
  allreduce_ = nullptr;
  if (!symmetric_) return;
  const int first_device = num_devices_ - d_ - n_;
  const int at = uniform_ ? cost_.DeviceKind(first_device) : offset_;
  row_ = &stage_cache_[Key(0, n_, at)];
  if (row_->empty()) {
    StageCost none;
    none.forward_ms = -1;
    row_->assign(i_, none);
  }
  if (!uniform_ || n_ <= 1) return;
  std::vector<double>& ar = allreduce_cache_[Key(0, n_, offset_)];
  if (ar.empty()) {
    ListDevices();
    ar.resize(i_);
    cost_.AllReduceMsFrom(std::span<const int>(block_firsts_.data(), i_), ends_[i_ - 1], devs_,
                          ar.data());
  }
  allreduce_ = &ar;
}

StageCost PipeDreamCosts::Stage(int ip, int k) {
  const int first = block_firsts_[ip], last = ends_[i_ - 1];
  if (!symmetric_) {
    ListDevices();
    return EvaluateStage(cost_, first, last, devs_, m_, k, false, false, uniform_);
  }
  StageCost& cached = (*row_)[ip];
  if (cached.forward_ms < 0) {
    ListDevices();
    cached = EvaluateStage(cost_, first, last, devs_, m_, 0, false, false, uniform_);
  }
  StageCost c = cached;
  if (allreduce_) c.allreduce_ms = c.allreduce_exposed_ms = (*allreduce_)[ip];
  c.memory_bytes += k * (*act_)[ip];
  return c;
}

}  // namespace dapple::internal
