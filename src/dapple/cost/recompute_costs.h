// What re-computing some layers of a stage costs and saves (Note [Re-computation per layer]
// in runtime/recompute_segments.cc): the extra forward and the activation bytes a micro-batch
// keeps, for the simulator and the planners alike.
#pragma once

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
// whose layers `recomputed` (sorted, in the stage) re-compute.
struct RecomputeBytes {
  // From its forward to its backward (or I): the other layers' activations and each
  // segment's input.
  double kept = 0;
  // What a backward rebuilds at once, one segment after the other: the largest segment's
  // activations (added to `kept` while that backward runs).
  double rebuilt_peak = 0;
  // What a split backward (I, then W later) holds from I to W beyond `kept`: every
  // segment's activations less its input, which W needs (so kept + rebuilt = the
  // activations without re-computation).
  double rebuilt = 0;
};
RecomputeBytes RecomputeActivationBytes(const CostModel& cost, int first, int last,
                                        const std::vector<int>& recomputed, double samples);

// The extra forward of the layers `recomputed` on `device` for `samples` samples: their
// forward times, segment by segment.
double RecomputeForwardMs(const CostModel& cost, const std::vector<int>& recomputed, double samples,
                          int device);

}  // namespace dapple
