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

// Note [Latency over a shared tail]
// The DAPPLE DP scores many lists that differ in their first few entries only (the head
// stage, the new stage and the transfers around them) in front of one suffix's list, the
// tail, fixed while the DP visits that suffix. ComputeLatency's work over the tail can be
// done once: PivotStage scans from the end, so its state (pivot, `middle`) after the tail
// does not depend on the head; when the pivot stays in the tail, the ending's walk down
// from the pivot over the tail and its maximum over the stages after the pivot do not
// either. LatencyWithTail finishes the same operations in the same order over the head,
// so its figure is ComputeLatency's to the last bit, with two exceptions that need no
// order: the warm-up sum (from index 0 upward) is added again over the tail, and the
// ending's maximum over the stages after the pivot, a chain of std::max from the first
// loop's value, is one std::max of that value and the chain's from -1e300 (the chain
// keeps the first of its largest values either way; the figures are never NaN). When the
// pivot moves into the head, the ending's second loop walks the tail.
struct LatencyTail {
  std::span<const LatencyStage> stages;  // the tail; the caller keeps it alive
  double m1 = 0;                         // num_micro_batches - 1
  int pivot = -1;                        // PivotStage's scan over the tail alone; -1: empty
  double middle = 0;                     // the scan's sum after the tail's index 0
  double pivot_load = 0;                 // m1 * (F + B) of the pivot
  double e = 0, ending = -1e300;         // the ending's first loop over pivot..0
  double after_max = -1e300;             // its second loop over the stages after the pivot
};

// The state of `tail` (may be empty) for lists head ++ tail. O(tail). REQUIRES M >= 1.
LatencyTail TailOf(std::span<const LatencyStage> tail, int num_micro_batches);

// ComputeLatency(head ++ tail.stages, M).latency_ms to the last bit (M: TailOf's), in
// O(head + tail) additions without the pivot scan over the tail. REQUIRES head non-empty.
double LatencyWithTail(std::span<const LatencyStage> head, const LatencyTail& tail);

// The latency stage list of compute stages with the transfer after each one in between:
// c0, t0, c1, t1, ..., c_{S-1}. REQUIRES: transfer_ms.size() == compute.size() - 1.
std::vector<LatencyStage> WithTransfers(const std::vector<LatencyStage>& compute,
                                        const std::vector<double>& transfer_ms);

// The compute stage a latency-list index belongs to: a transfer counts for the stage that
// sends it (index i -> i / 2 in a WithTransfers list).
inline int ComputeStageOf(int latency_index) { return latency_index / 2; }

}  // namespace dapple
