// The planner's analytic iteration latency L and its pivot stage (docs/design.md section 6),
// over a list of stages in which every cross-stage transfer is a stage of its own.
#pragma once

#include <span>
#include <vector>

namespace dapple {

// One entry of the latency model's stage list. A compute stage has its per-micro-batch
// forward and backward times (of one replica), its gradient allreduce and the optimizer
// update after it; a transfer stage has F = B = the transfer time and neither.
struct LatencyStage {
  double forward_ms = 0;
  double backward_ms = 0;
  double allreduce_ms = 0;
  double update_ms = 0;  // U_s: the STEP after the allreduce (the slowest replica's)
};

struct PipelineLatency {
  double latency_ms = 0;  // L = warmup + steady + ending
  int pivot = 0;          // Q, an index into the stage list given
  double warmup_ms = 0;   // T_w = sum_{s<=Q} F_s
  double steady_ms = 0;   // T_s = (M-1)(F_Q + B_Q)
  double ending_ms = 0;   // T_e = max_s (AR_s + U_s + E_s)
};

// The pivot stage Q: start with Q = S-1; for s = S-2 down to 0, with
// l1 = (M-1)(F_s+B_s) and l2 = (M-1)(F_Q+B_Q) + sum_{s<s'<Q}(F_s'+B_s'), Q = s if l1 > l2.
// REQUIRES: stages non-empty, num_micro_batches >= 1.
int PivotStage(std::span<const LatencyStage> stages, int num_micro_batches);

// L with E_s = sum_{a=s..Q} B_a for s <= Q and E_s = -sum_{a=Q+1..s-1} B_a for s > Q
// (the corrected form of the paper's formula), and each stage's optimizer update U_s after
// its allreduce (the paper's iteration ends at the last update; it has no U_s). O(S).
PipelineLatency ComputeLatency(std::span<const LatencyStage> stages, int num_micro_batches);
inline PipelineLatency ComputeLatency(const std::vector<LatencyStage>& stages,
                                      int num_micro_batches) {
  return ComputeLatency(std::span<const LatencyStage>(stages), num_micro_batches);
}

// The latency stage list of compute stages with the transfer after each one in between:
// c0, t0, c1, t1, ..., c_{S-1}. REQUIRES: transfer_ms.size() == compute.size() - 1.
std::vector<LatencyStage> WithTransfers(const std::vector<LatencyStage>& compute,
                                        const std::vector<double>& transfer_ms);

// The compute stage a latency-list index belongs to: a transfer counts for the stage that
// sends it (index i -> i / 2 in a WithTransfers list).
inline int ComputeStageOf(int latency_index) { return latency_index / 2; }

}  // namespace dapple
