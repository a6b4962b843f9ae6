// Re-computation per layer in the cost model's terms: see recompute_costs.h.
#include "dapple/cost/recompute_costs.h"

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
  for (int l : recomputed)
    DAPPLE_CHECK(l >= first && l <= last, "re-computed layer outside the stage");
  return SumRecomputeBytes(
      first, last, recomputed, [&](int a, int b) { return cost.ActivationBytes(a, b, samples); },
      [&](int l) { return cost.StageInputBytes(l, samples); });
}

double RecomputeForwardMs(const CostModel& cost, const std::vector<int>& recomputed, double samples,
                          int device) {
  double ms = 0;
  for (const RecomputeSegment& seg : RecomputeSegments(recomputed))
    ms += cost.ForwardMs(seg.first, seg.last, samples, device);
  return ms;
}

}  // namespace dapple
