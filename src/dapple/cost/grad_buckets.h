// Gradient buckets of a replicated stage for the allreduce overlapped with the backward
// (docs/schedules.md, "Allreduce overlapped with the backward"): which layers each bucket
// holds, what it costs, and how much of it the backward cannot hide.
#pragma once

#include <vector>

#include "dapple/cost/cost_model.h"

namespace dapple {

struct GradBucket {
  int first_layer = 0;  // inclusive layer range, a contiguous part of the stage
  int last_layer = 0;
  double bytes = 0;  // parameter bytes
};

// Layers [first, last] grouped as PyTorch DDP does, from `last` backwards (the order in
// which the backward produces gradients): a bucket takes layers until the next one would
// take it past cost.AllReduceBucketBytes(); a layer bigger than that is a bucket of its
// own. Layers without parameters join the bucket being filled, and a parameter-free
// remainder below the last bucket joins it, so the buckets partition [first, last].
// Returned in allreduce order: bucket 0 holds `last`. Never empty (a stage without
// parameters is one bucket).
std::vector<GradBucket> GradientBuckets(const CostModel& cost, int first, int last);

// The same grouping on explicit sizes: layer_bytes[i] is the parameter bytes of layer
// first + i, `cap` the bucket size. GradientBuckets is this on cost.ParameterBytes, and the
// runtime calls it on a stage's real parameters, so both group the same way.
std::vector<GradBucket> GroupGradientBuckets(const std::vector<double>& layer_bytes, int first,
                                             double cap);

// cost.AllReduceMs of each bucket among `devices`; with `sharded`, its ReduceScatterMs (a
// stage that shards its optimizer state reduce-scatters each bucket instead).
std::vector<double> BucketAllReduceMs(const CostModel& cost, const std::vector<GradBucket>& buckets,
                                      const std::vector<int>& devices, bool sharded = false);

// What buckets run one after another on one stream leave after the instruction they overlap
// ends: bucket k (of K, in allreduce order) is ready ready(k) after that instruction starts,
// ready(K-1) being its whole length, and takes bucket_ms[k]; max over k of (ready(k) -
// ready(K-1) + the bucket times from k on). At least the last bucket's time. Shared by the
// planner's cost figures (ExposedAllReduceMs) and its stop bound (on the simulator's
// readiness figures).
template <typename Ready>
double BucketsLeftAfter(const std::vector<double>& bucket_ms, Ready ready) {
  const int K = static_cast<int>(bucket_ms.size());
  const double whole = ready(K - 1);
  double after = 0, exposed = 0;  // after: sum of bucket_ms[k..]
  for (int k = K - 1; k >= 0; --k) {
    after += bucket_ms[k];
    const double r = ready(k);
    exposed = exposed > r - whole + after ? exposed : r - whole + after;
  }
  return exposed;
}

// The allreduce time left after one replica's last backward ends, when the buckets run
// one after another on one stream and bucket k starts once that backward has passed
// through bucket k's layers: max over k of (BackwardMs(first_k .. last) - BackwardMs(stage)
// + sum of the bucket times from k on), for `samples` samples on `device`. It is at least
// the last bucket's time; with a single bucket it is the whole allreduce. With
// `split_backward` the buckets are ready during the last weight-gradient part (W) instead,
// and BackwardWeightMs stands for BackwardMs (the simulator's readiness in both cases).
double ExposedAllReduceMs(const CostModel& cost, const std::vector<GradBucket>& buckets,
                          const std::vector<double>& bucket_ms, double samples, int device,
                          bool split_backward = false);

}  // namespace dapple
