// L and the pivot stage: see pipeline_latency.h for the formulas.
#include "dapple/plan/pipeline_latency.h"

#include <algorithm>

#include "dapple/common/error.h"

namespace dapple {

int PivotStage(std::span<const LatencyStage> st, int num_micro_batches) {
  const int n = static_cast<int>(st.size());
  DAPPLE_CHECK(n > 0 && num_micro_batches >= 1);
  const double m1 = num_micro_batches - 1;
  int q = n - 1;
  double middle = 0;  // sum_{s<s'<Q} (F_s' + B_s') for the s being tried
  for (int s = n - 2; s >= 0; --s) {
    double l1 = m1 * (st[s].forward_ms + st[s].backward_ms);
    double l2 = m1 * (st[q].forward_ms + st[q].backward_ms) + middle;
    if (l1 > l2) {
      q = s;
      middle = 0;
    } else {
      middle += st[s].forward_ms + st[s].backward_ms;
    }
  }
  return q;
}

PipelineLatency ComputeLatency(std::span<const LatencyStage> st, int num_micro_batches) {
  PipelineLatency r;
  const int n = static_cast<int>(st.size());
  const int q = PivotStage(st, num_micro_batches);
  r.pivot = q;
  for (int s = 0; s <= q; ++s) r.warmup_ms += st[s].forward_ms;
  r.steady_ms = (num_micro_batches - 1) * (st[q].forward_ms + st[q].backward_ms);
  // E_s for s <= Q, walking down from Q: B_Q + ... + B_s.
  double ending = -1e300;
  double e = 0;
  for (int s = q; s >= 0; --s) {
    e += st[s].backward_ms;
    ending = std::max(ending, st[s].allreduce_ms + st[s].update_ms + e);
  }
  // E_s for s > Q: -(B_{Q+1} + ... + B_{s-1}).
  e = 0;
  for (int s = q + 1; s < n; ++s) {
    ending = std::max(ending, st[s].allreduce_ms + st[s].update_ms - e);
    e += st[s].backward_ms;
  }
  r.ending_ms = ending;
  r.latency_ms = r.warmup_ms + r.steady_ms + r.ending_ms;
  return r;
}

std::vector<LatencyStage> WithTransfers(const std::vector<LatencyStage>& compute,
                                        const std::vector<double>& transfer_ms) {
  DAPPLE_CHECK(!compute.empty() && transfer_ms.size() + 1 == compute.size());
  std::vector<LatencyStage> out;
  out.reserve(2 * compute.size() - 1);
  for (size_t i = 0; i < compute.size(); ++i) {
    if (i > 0) out.push_back({transfer_ms[i - 1], transfer_ms[i - 1], 0.0, 0.0});
    out.push_back(compute[i]);
  }
  return out;
}

}  // namespace dapple
