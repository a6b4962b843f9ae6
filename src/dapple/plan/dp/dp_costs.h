// The DAPPLE DP's costs (internal to plan/): what its recurrence asks of the cost model, a
// new stage's F, B, AR, update and memory and the head stage of a score with its transfer,
// and the caches that answer the many repeats (Note [The DP's caches] in dp_costs.cc). Every
// figure is the cost model's own, bit for bit (tests/plan/dapple_dp_reference_test.cc).
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/plan/dp/dapple_dp.h"
#include "dapple/plan/dp/dp_stage_placer.h"
#include "dapple/plan/dp/dp_state.h"
#include "dapple/plan/pipeline_latency.h"
#include "dapple/plan/plan_costs.h"

namespace dapple::internal {

class DpCosts {
 public:
  // `ends`: the last layer of each block. Keeps references to all arguments.
  DpCosts(const CostModel& cost, const DpOptions& options, const std::vector<int>& ends,
          const DpStagePlacer& placer);

  // The stages the next calls ask about end where block i - 1 ends (the DP's block i).
  void StartBlock(int i);
  // The next calls ask about the new stage `s` (in front of a suffix, at the block of
  // StartBlock).
  void StartStage(const NewStage& s);

  // Stage s from block ip to the block's end, with warm-up depth k: its costs, or none when
  // memory is enforced and it does not fit. Counts in `stats` whether it would miss with
  // the deeper warm-up depth `k_deeper` (DpOptions::deeper_schedule).
  // Inline: the recurrence's innermost call.
  std::optional<StageCost> Stage(int ip, int k, int k_deeper, DpStats& stats) {
    if (!uniform_) return StageOnDevices(ip, k, stats);
    RangeCost& rc = range_[ip][stage_->replicas];
    if (rc.f < 0) AskRange(ip, rc);
    StageCost c;
    c.forward_ms = rc.f;
    c.backward_ms = rc.b;
    c.update_ms = rc.update;
    c.memory_bytes = rc.stat + k * rc.act;
    c.device_memory_bytes = device_memory_;
    // Note [Optimizer sharding in the planner]: a replicated stage that fits only with its
    // optimizer state sharded is costed sharded (reduce-scatter and all-gather half of the
    // allreduce each, 1/r of the update), as ShardWhereItPays then shards its plan.
    const int r = stage_->replicas;
    const bool shard = r > 1 && !c.fits() && rc.sharded_stat + k * rc.act <= device_memory_;
    if (shard) c.memory_bytes = rc.sharded_stat + k * rc.act;
    if (o_.enforce_memory && !c.fits()) return std::nullopt;
    const double stat = shard ? rc.sharded_stat : rc.stat;
    if (o_.enforce_memory && stat + k_deeper * rc.act > device_memory_) ++stats.deeper_misfits;
    if (r > 1) {
      if (!allreduce_asked_) AskAllReduce();  // the stage's devices are alike at every ip
      c.allreduce_ms = allreduce_by_ip_[ip];
    }
    if (shard) {
      c.shard_optimizer = true;
      c.allreduce_ms /= 2;
      c.update_ms = rc.update / r + c.allreduce_ms;
    }
    return c;
  }
  // The paper's T_PL head of a score at block ip: the layers before block ip as one stage
  // on the devices left free by s (fresh first, at most m), and its transfer to s.
  // REQUIRES: ip >= 1, s.free_after >= 1. Inline: asked for most transitions.
  std::pair<LatencyStage, double> Head(int ip) {
    if (!um_) FindUsage();
    LatencyStage& head = um_->head_cost[ip];
    if (head.forward_ms < 0) head = HeadCost(ip);
    const double transfer = head_to_ ? (*head_to_)[ip] : -1.0;
    return {head, transfer < 0 ? HeadTransfer(ip) : transfer};
  }

 private:
  // F and B of the largest slice with n replicas, static and activation bytes, update, of
  // a block range ending at the block's end (uniform devices; f < 0: not asked yet).
  struct RangeCost {
    double f = -1, b = 0, act = 0, stat = 0, sharded_stat = 0, update = 0;
  };
  // Per usage: the head's devices, its costs by ip and its transfers per take.
  struct UsageMemo {
    std::vector<int> head_devices;
    std::vector<LatencyStage> head_cost;  // by ip; forward < 0: not computed yet
    std::vector<std::pair<UsagePlacer::Take, std::vector<double>>> head_to;
  };
  // Stage's figures when devices differ: EvaluateStage on the stage's devices.
  std::optional<StageCost> StageOnDevices(int ip, int k, DpStats& stats) const;
  void AskRange(int ip, RangeCost& rc) const;  // the cost model's figures of a range
  void AskAllReduce();                  // the stage's allreduce at every first block, at once
  void FindUsage();                     // um_ and head_to_ of the current stage
  LatencyStage HeadCost(int ip) const;  // the head's costs, asked of the cost model
  double HeadTransfer(int ip);          // the head's transfer, asked (and kept, if kept)

  const CostModel& cost_;
  const DpOptions& o_;
  const std::vector<int>& ends_;
  const DpStagePlacer& placer_;
  const bool uniform_;
  const double device_memory_;
  std::vector<int> block_firsts_;
  std::vector<std::vector<RangeCost>> range_;  // [ip][replicas], for the current block
  UsageTable<UsageMemo> by_usage_;
  int block_ = 0, last_ = 0;  // the current block and its last layer
  const NewStage* stage_ = nullptr;
  std::vector<double> allreduce_by_ip_;  // the current stage's, once asked
  bool allreduce_asked_ = false;
  UsageMemo* um_ = nullptr;                 // the current stage's usage memo, once looked up
  std::vector<double>* head_to_ = nullptr;  // its transfers for the stage's take, if kept
};

}  // namespace dapple::internal
