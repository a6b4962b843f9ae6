// Re-computation per layer in the cost model's terms: see recompute_costs.h.
#include "dapple/cost/recompute_costs.h"

#include <algorithm>

#include "dapple/common/error.h"

namespace dapple {

std::vector<RecomputeSegment> RecomputeSegments(const std::vector<int>& layers) {
  std::vector<RecomputeSegment> segments;
  for (int l : layers) {
    if (!segments.empty() && segments.back().last + 1 == l)
      segments.back().last = l;
    else
      segments.push_back({l, l});
  }
  return segments;
}

RecomputeBytes RecomputeActivationBytes(const CostModel& cost, int first, int last,
                                        const std::vector<int>& recomputed, double samples) {
  RecomputeBytes b;
  const double all = cost.ActivationBytes(first, last, samples);
  double freed = 0, inputs = 0;
  for (const RecomputeSegment& seg : RecomputeSegments(recomputed)) {
    DAPPLE_CHECK(seg.first >= first && seg.last <= last, "re-computed layer outside the stage");
    const double act = cost.ActivationBytes(seg.first, seg.last, samples);
    freed += act;
    inputs += cost.StageInputBytes(seg.first, samples);
    b.rebuilt_peak = std::max(b.rebuilt_peak, act);
  }
  b.kept = all - freed + inputs;
  b.rebuilt = all - b.kept;
  return b;
}

double RecomputeForwardMs(const CostModel& cost, const std::vector<int>& recomputed, double samples,
                          int device) {
  double ms = 0;
  for (const RecomputeSegment& seg : RecomputeSegments(recomputed))
    ms += cost.ForwardMs(seg.first, seg.last, samples, device);
  return ms;
}

}  // namespace dapple
