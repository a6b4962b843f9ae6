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

// Note [Latency over a shared tail]: the loops of PivotStage and ComputeLatency, split.
LatencyTail TailOf(std::span<const LatencyStage> st, int num_micro_batches) {
  DAPPLE_CHECK(num_micro_batches >= 1);
  LatencyTail t;
  t.stages = st;
  t.m1 = num_micro_batches - 1;
  const int n = static_cast<int>(st.size());
  if (n == 0) return t;
  int q = n - 1;
  double middle = 0;
  for (int s = n - 2; s >= 0; --s) {
    double l1 = t.m1 * (st[s].forward_ms + st[s].backward_ms);
    double l2 = t.m1 * (st[q].forward_ms + st[q].backward_ms) + middle;
    if (l1 > l2) {
      q = s;
      middle = 0;
    } else {
      middle += st[s].forward_ms + st[s].backward_ms;
    }
  }
  t.pivot = q;
  t.middle = middle;
  t.pivot_load = t.m1 * (st[q].forward_ms + st[q].backward_ms);
  for (int s = q; s >= 0; --s) {
    t.e += st[s].backward_ms;
    t.ending = std::max(t.ending, st[s].allreduce_ms + st[s].update_ms + t.e);
  }
  double e = 0;
  for (int s = q + 1; s < n; ++s) {
    t.after_max = std::max(t.after_max, st[s].allreduce_ms + st[s].update_ms - e);
    e += st[s].backward_ms;
  }
  return t;
}

double LatencyWithTail(std::span<const LatencyStage> head, const LatencyTail& tail) {
  const int p = static_cast<int>(head.size());
  DAPPLE_CHECK(p > 0);
  const double m1 = tail.m1;
  // PivotStage's scan, going on over the head; q < 0: the pivot is the tail's.
  int q = -1;
  double load = tail.pivot_load, middle = tail.middle;
  int s = p - 1;
  if (tail.pivot < 0) {  // no tail: the scan starts at the head's last
    q = p - 1;
    load = m1 * (head[q].forward_ms + head[q].backward_ms);
    s = p - 2;
  }
  for (; s >= 0; --s) {
    double l1 = m1 * (head[s].forward_ms + head[s].backward_ms);
    double l2 = load + middle;
    if (l1 > l2) {
      q = s;
      load = l1;
      middle = 0;
    } else {
      middle += head[s].forward_ms + head[s].backward_ms;
    }
  }
  double warmup = 0;
  double ending;
  if (q < 0) {  // the tail's pivot: its ending loops are done but over the head
    for (const LatencyStage& h : head) warmup += h.forward_ms;
    for (int a = 0; a <= tail.pivot; ++a) warmup += tail.stages[a].forward_ms;
    double e = tail.e;
    ending = tail.ending;
    for (int a = p - 1; a >= 0; --a) {
      e += head[a].backward_ms;
      ending = std::max(ending, head[a].allreduce_ms + head[a].update_ms + e);
    }
    ending = std::max(ending, tail.after_max);
  } else {
    for (int a = 0; a <= q; ++a) warmup += head[a].forward_ms;
    ending = -1e300;
    double e = 0;
    for (int a = q; a >= 0; --a) {
      e += head[a].backward_ms;
      ending = std::max(ending, head[a].allreduce_ms + head[a].update_ms + e);
    }
    e = 0;
    for (int a = q + 1; a < p; ++a) {
      ending = std::max(ending, head[a].allreduce_ms + head[a].update_ms - e);
      e += head[a].backward_ms;
    }
    for (const LatencyStage& t : tail.stages) {
      ending = std::max(ending, t.allreduce_ms + t.update_ms - e);
      e += t.backward_ms;
    }
  }
  return warmup + load + ending;
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
