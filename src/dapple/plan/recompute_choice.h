// Re-computation per layer in the planner (docs/planner.md, "Re-computation"): which layers
// of a stage re-compute so that it fits its devices' memory at the least extra forward.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "dapple/common/schedule_kind.h"
#include "dapple/cost/cost_model.h"
#include "dapple/cost/recompute_costs.h"
#include "dapple/format/plan.h"

namespace dapple {

// What a stage holds at the moments its activations may peak: `in_flight` micro-batches
// past their forward, `rebuilt` of them past their I (split backward) and before their W.
struct HeldMicroBatches {
  int in_flight = 0;
  int rebuilt = 0;
};

// Those moments for stage s of S under `kind` with M micro-batches and one chunk (the
// pairs no other pair dominates), counted on the schedule's list. Without a split backward
// one pair: (PeakInFlight, 0).
std::vector<HeldMicroBatches> HeldAtPeaks(ScheduleKind kind, int s, int S, int M);

// The activation bytes of a stage whose micro-batches keep `b` (RecomputeBytes), held as
// `held` says; without a split backward the backward's rebuilt segment comes on top.
double HeldActivationBytes(const RecomputeBytes& b, const std::vector<HeldMicroBatches>& held,
                           bool split);

// One stage's choice: layers [first, last] on `devices`, slices of a micro-batch of
// `micro_batch` samples, `budget_bytes` for activations (its devices' memory less its
// static memory).
struct RecomputeProblem {
  const CostModel* cost = nullptr;
  int first = 0, last = 0;
  std::vector<int> devices;
  int micro_batch = 1;
  std::vector<HeldMicroBatches> held;
  bool split = false;
  double budget_bytes = 0;
  // Layers that may re-compute (the profile times their forward); empty: all.
  std::vector<bool> forward_timed;
};

// Per layer of the problem: its activations, its input and its forward (the slowest
// replica's), as the cost model gives them.
struct LayerCosts {
  std::vector<double> activation_bytes, input_bytes, forward_ms;
};
LayerCosts CostsOfLayers(const RecomputeProblem& p);

// The activation bytes and extra forward ms of re-computing `layers` (sorted) in `p`, from
// the per-layer figures `c` (segments keep their first layer's input).
RecomputeBytes BytesOf(const RecomputeProblem& p, const LayerCosts& c,
                       const std::vector<int>& layers);
double HeldBytesOf(const RecomputeProblem& p, const LayerCosts& c, const std::vector<int>& layers);
double ExtraForwardMsOf(const LayerCosts& c, int first, const std::vector<int>& layers);

// Note [Choosing the layers that re-compute]
// A stage with at most kExhaustiveLayers layers that may re-compute tries every subset of
// them (4096 at most, each costed from per-layer sums): the least extra forward that fits.
// A larger one: greedy by saved bytes per forward millisecond: from no layer, add the layer that
// frees the most bytes of the in-flight micro-batches per ms of its forward until the stage fits
// (the one segment a whole backward rebuilds is paid once, by whichever segment is largest, so a
// first layer may free nothing until a second joins it); when no single layer frees any, the
// run of consecutive layers that lowers the held bytes most per ms. Beside it, evenly spaced
// segments: every layer but one in every g (kept, each ending a segment), for each g, and the
// whole stage. Each start then drops layers the stage fits without (the slowest first) and
// swaps a layer for a faster one while it still fits; the one with the least extra forward
// wins.
// Returns the sorted layers (empty when the stage fits as it is), or nullopt when no choice
// fits, all layers included.
constexpr int kExhaustiveLayers = 12;
std::optional<std::vector<int>> ChooseRecomputeLayers(const RecomputeProblem& p);

// Note [Re-computation choices kept]
// A planner call asks ChooseRecomputeLayers about the same stage many times: every
// proposal, neighbour and schedule family with that stage, when it does not fit, and each
// call searches the stage's layers afresh. The choice depends only on the problem's layers, the
// kinds of its devices in order (CostModel::DeviceKind: devices of one kind cost the same),
// micro-batch, held micro-batches, split and budget, given the cost model and forward_timed,
// which are the call's. So the memo keeps each choice by those, for one cost model and
// forward_timed (checked). It gives ChooseRecomputeLayers' own answer. Thread-safe: two
// threads asking about one new stage may both choose, alike.
class RecomputeMemo {
 public:
  std::optional<std::vector<int>> Choose(const RecomputeProblem& p);

 private:
  using Key =
      std::tuple<int, int, std::vector<int>, int, std::vector<std::pair<int, int>>, bool, double>;
  std::mutex mu_;
  const CostModel* cost_ = nullptr;  // of the first problem; every later one's must match
  std::vector<bool> forward_timed_;
  std::map<Key, std::optional<std::vector<int>>> known_;
};

// Sets the re-computation of `st` (one chunk, slices of `micro_batch`, holding `held` at its
// peaks, `budget_bytes` for activations): recompute_layers from ChooseRecomputeLayers (through
// `memo` when given), or the whole stage when every layer that may is chosen, or when no
// choice fits (the plan is then dropped for its memory).
void ChooseStageRecompute(StagePlan& st, const CostModel& cost, int micro_batch,
                          std::vector<HeldMicroBatches> held, bool split, double budget_bytes,
                          const std::vector<bool>& forward_timed, RecomputeMemo* memo = nullptr);

}  // namespace dapple
