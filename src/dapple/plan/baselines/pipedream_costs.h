// PipeDream's DP's costs (internal to plan/): what its recurrence (PipeDreamPlan in
// pipedream_planner.cc) asks of the cost model, a stage's costs and its transfer to the
// next stage, and the caches that answer the many repeats (Note [PipeDream's caches] in
// pipedream_costs.cc). Every figure is the cost model's own, bit for bit.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/plan/stage_cost.h"

namespace dapple::internal {

class PipeDreamCosts {
 public:
  // `ends`: the last layer of each block; `micro_batch`: samples per micro-batch. Keeps
  // references to `cost` and `ends`.
  PipeDreamCosts(const CostModel& cost, const Cluster& cluster, int micro_batch,
                 const std::vector<int>& ends);

  // The stages the next calls ask about end where block i - 1 ends.
  void StartBlock(int i);
  // The replica counts a stage of at most `max_n` devices may have (ReplicaCounts).
  const std::vector<int>& Counts(int max_n);
  // The next calls ask about the stage on the n devices before the last d (ids D-d-n ..
  // D-d-1), followed, when d > 0, by the stage on the next `next_n` devices.
  void StartStage(int d, int n, int next_n);
  // The stage's transfer to the next one, activation and gradient; 0 when it is the last.
  double TransferMs() const { return transfer_ms_; }
  // The stage from block ip to the block's end with warm-up depth k (dapple-a's).
  StageCost Stage(int ip, int k);

 private:
  // The stage's devices and those of the stage after, into devs_ and to_ once per stage.
  void ListDevices();
  double AskTransfer();
  void AskActivations();
  void FindStageRow();

  const CostModel& cost_;
  const std::vector<int>& ends_;
  const int m_, num_blocks_, num_devices_;
  int server_size_ = 1;
  bool symmetric_ = false, uniform_ = false;
  std::vector<int> block_firsts_;
  // The block whose end the stages share; the stage asked about.
  int i_ = 0, d_ = 0, n_ = 0, next_n_ = 0, offset_ = 0;
  bool listed_ = false;
  std::vector<int> devs_, to_;
  double transfer_ms_ = 0;
  // Per block: the stages' costs by (n, offset or kind) and ip; allreduce by (n, offset)
  // and ip on uniform devices; activation bytes by n and ip.
  std::unordered_map<uint64_t, std::vector<StageCost>> stage_cache_;
  std::unordered_map<uint64_t, std::vector<double>> allreduce_cache_;
  std::vector<std::vector<double>> act_by_n_;
  std::vector<int> act_done_;  // the n whose act_by_n_ holds the block's
  // For every block: transfers by (n, next n, offset) and block end.
  std::unordered_map<uint64_t, std::vector<double>> transfer_cache_;
  std::vector<std::vector<int>> counts_by_max_;
  // The stage asked about: its row of stage_cache_, its allreduce by ip (or null), its
  // activation bytes by ip.
  std::vector<StageCost>* row_ = nullptr;
  const std::vector<double>* allreduce_ = nullptr;
  const std::vector<double>* act_ = nullptr;
};

}  // namespace dapple::internal
