// The DAPPLE DP's costs and caches: see dp_costs.h.
//
// Note [The DP's caches]
// The recurrence asks the same things many times: a block range's costs for every suffix
// and placement with the same replica count, the head stage of a score for every new stage
// that leaves the same usage, the head's transfer for every boundary. What repeats is kept:
// * per block, the costs of each block range ending there by replica count (RangeCost),
//   when the devices are alike (UniformDevices): then they do not depend on which devices;
// * per new stage, its allreduce at every first block at once (CostModel::AllReduceMsFrom);
// * per usage (devices taken per server, not the canonical key: the head's placement
//   depends on which servers), found by an incremental hash (Note [Usages by incremental
//   hash] in dp_state.h): the head's devices and its costs by first block, and the head's
//   transfer to the new stage at every boundary at once (CostModel::TransferMsAt), per take
//   that led to the usage (with the usage, the take fixes the new stage's devices). A usage
//   is reached by many takes (more than 8 on 2 servers of 8); past kTakesKept the cost
//   model is asked each time. Where layers' bytes per sample are fractional the cost model
//   walks the slices at each call (Note [Split-concat by server runs]), so these tables
//   spare the DP's innermost loop those walks.
// The new stage's transfer to its suffix and its allreduce are asked of the cost model,
// which answers the same devices asked again at other layers in O(1) (Note [Split-concat
// by server runs], Note [Rings asked again]): tables of them by device list cost more in
// allocations.
#include "dapple/plan/dp/dp_costs.h"

#include <algorithm>
#include <span>

#include "dapple/common/error.h"

namespace dapple::internal {
namespace {
constexpr size_t kTakesKept = 64;
}  // namespace

DpCosts::DpCosts(const CostModel& cost, const DpOptions& options, const std::vector<int>& ends,
                 const DpStagePlacer& placer)
    : cost_(cost),
      o_(options),
      ends_(ends),
      placer_(placer),
      uniform_(UniformDevices(cost)),
      device_memory_(cost.DeviceMemoryBytes(0)),
      allreduce_by_ip_(ends.size()) {
  for (size_t b = 0; b < ends.size(); ++b) block_firsts_.push_back(b == 0 ? 0 : ends[b - 1] + 1);
  const int max_replicas = std::min(cost.num_devices(), options.micro_batch_size);
  range_.assign(ends.size(), std::vector<RangeCost>(max_replicas + 1));
}

void DpCosts::StartBlock(int i) {
  block_ = i;
  last_ = ends_[i - 1];
  for (auto& row : range_) std::fill(row.begin(), row.end(), RangeCost{});
}

void DpCosts::StartStage(const NewStage& s) {
  stage_ = &s;
  allreduce_asked_ = false;
  um_ = nullptr;
  head_to_ = nullptr;
}

std::optional<StageCost> DpCosts::StageOnDevices(int ip, int k, DpStats& stats) const {
  StageCost c =
      EvaluateStage(cost_, block_firsts_[ip], last_, stage_->devices, o_.micro_batch_size, k);
  if (!c.fits() && stage_->replicas > 1) {  // sharded if only that fits (dp_costs.h)
    StageCost sharded = EvaluateStage(cost_, block_firsts_[ip], last_, stage_->devices,
                                      o_.micro_batch_size, k, false, false, false, true);
    if (sharded.fits()) c = sharded;
  }
  if (o_.enforce_memory && !c.fits()) return std::nullopt;
  if (o_.enforce_memory && o_.deeper_schedule) ++stats.deeper_misfits;
  return c;
}

void DpCosts::AskRange(int ip, RangeCost& rc) const {
  const int first = block_firsts_[ip];
  const int samples = SamplesPerReplica(o_.micro_batch_size, stage_->replicas);
  rc.f = cost_.ForwardMs(first, last_, samples, 0);
  rc.b = cost_.BackwardMs(first, last_, samples, 0);
  // What a micro-batch holds: the stage's input and its layers' outputs (RecomputeBytes).
  rc.act = cost_.StageInputBytes(first, samples) + cost_.ActivationBytes(first, last_, samples);
  rc.stat = cost_.StaticMemoryBytes(first, last_);
  rc.sharded_stat = stage_->replicas > 1
                        ? cost_.ShardedStaticMemoryBytes(first, last_, stage_->replicas)
                        : rc.stat;
  rc.update = cost_.UpdateMs(first, last_, 0);
}

void DpCosts::AskAllReduce() {
  cost_.AllReduceMsFrom(std::span<const int>(block_firsts_.data(), block_), last_, stage_->devices,
                        allreduce_by_ip_.data());
  allreduce_asked_ = true;
}

void DpCosts::FindUsage() {
  const NewStage& s = *stage_;
  um_ = &by_usage_.At(s.usage_hash, s.usage);
  if (um_->head_devices.empty()) {
    um_->head_devices = placer_.HeadDevices(s.usage, std::min(s.free_after, o_.micro_batch_size));
    um_->head_cost.assign(ends_.size(), {-1.0, 0.0, 0.0, 0.0});
  }
  for (auto& [kept_take, ms] : um_->head_to)
    if (kept_take == s.take) head_to_ = &ms;
  if (!head_to_ && um_->head_to.size() < kTakesKept) {
    // Every boundary before this block at once: the transfer after layer ends[ip - 1] =
    // first - 1 for ip = 1..block-1 (CostModel::TransferMsAt).
    head_to_ = &um_->head_to.emplace_back(s.take, std::vector<double>(ends_.size(), -1.0)).second;
    cost_.TransferMsAt(std::span<const int>(ends_.data(), block_ - 1), o_.micro_batch_size,
                       um_->head_devices, s.devices, head_to_->data() + 1);
  }
}

LatencyStage DpCosts::HeadCost(int ip) const {
  const StageCost hc = EvaluateStage(cost_, 0, block_firsts_[ip] - 1, um_->head_devices,
                                     o_.micro_batch_size, 0, false, false, uniform_);
  return {hc.forward_ms, hc.backward_ms, hc.allreduce_ms, hc.update_ms};
}

double DpCosts::HeadTransfer(int ip) {
  const double transfer = cost_.TransferMs(block_firsts_[ip] - 1, o_.micro_batch_size,
                                           um_->head_devices, stage_->devices);
  if (head_to_) (*head_to_)[ip] = transfer;
  return transfer;
}

}  // namespace dapple::internal
