// What re-computing some layers of a stage costs and saves (Note [Re-computation per layer]
// in runtime/worker/recompute_segments.cc): the extra forward and the activation bytes a
// micro-batch keeps, for the simulator and the planners alike.
#pragma once

#include <algorithm>
#include <vector>

#include "dapple/cost/cost_model.h"

namespace dapple {

// A run of consecutive layers that re-compute: it keeps only the input of `first`.
struct RecomputeSegment {
  int first = 0;
  int last = 0;
};

// The maximal runs of consecutive layers of `layers` (sorted, without repeats).
std::vector<RecomputeSegment> RecomputeSegments(const std::vector<int>& layers);

// The activation bytes of one micro-batch slice of `samples` samples on stage [first, last]
// whose layers `recomputed` (sorted, in the stage) re-compute. A micro-batch holds what the
// runtime holds (Note [Re-computation per layer] in runtime/worker/recompute_segments.cc): the
// stage's input as received and every layer's output. A segment of re-computed layers frees
// its layers' outputs but its last's when a layer of the stage follows it: that output is the
// next layer's input, which that layer keeps for its backward.
struct RecomputeBytes {
  // From its forward to its backward (or I): the stage's input, the outputs the segments do
  // not free, and each segment's input (on a chain the output of the layer before it, or the
  // stage's input: held already; on a graph also the tensors that skip into the segment).
  double kept = 0;
  // What a backward rebuilds at once, one segment after the other: the largest segment's
  // outputs (added to `kept` while that backward runs).
  double rebuilt_peak = 0;
  // What a split backward (I, then W later) holds from I to W beyond `kept`: every
  // segment's outputs, rebuilt at I.
  double rebuilt = 0;
};
RecomputeBytes RecomputeActivationBytes(const CostModel& cost, int first, int last,
                                        const std::vector<int>& recomputed, double samples);

// The sums behind RecomputeActivationBytes from any source of figures, so that the planner's
// per-layer tables and the cost model count alike: `act(a, b)` the outputs of layers a..b,
// `input(l)` what crosses into layer l (the stage's input for l = first).
template <typename Act, typename Input>
RecomputeBytes SumRecomputeBytes(int first, int last, const std::vector<int>& recomputed,
                                 const Act& act, const Input& input) {
  RecomputeBytes b;
  const double stage_input = input(first);
  double freed = 0, skips = 0;
  for (const RecomputeSegment& seg : RecomputeSegments(recomputed)) {
    const double seg_act = act(seg.first, seg.last);
    freed += seg_act - (seg.last < last ? act(seg.last, seg.last) : 0.0);
    // Segments are maximal, so the layer before one is held (or is the stage's input).
    const double held_before = seg.first == first ? stage_input : act(seg.first - 1, seg.first - 1);
    skips += std::max(0.0, input(seg.first) - held_before);
    b.rebuilt += seg_act;
    b.rebuilt_peak = std::max(b.rebuilt_peak, seg_act);
  }
  b.kept = stage_input + act(first, last) - freed + skips;
  return b;
}

// The extra forward of the layers `recomputed` on `device` for `samples` samples: their
// forward times, segment by segment.
double RecomputeForwardMs(const CostModel& cost, const std::vector<int>& recomputed, double samples,
                          int device);

}  // namespace dapple
