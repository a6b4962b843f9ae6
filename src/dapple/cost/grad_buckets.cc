// Gradient buckets for the overlapped allreduce: see grad_buckets.h.
#include "dapple/cost/grad_buckets.h"

#include <algorithm>

#include "dapple/common/error.h"

namespace dapple {

std::vector<GradBucket> GradientBuckets(const CostModel& cost, int first, int last) {
  DAPPLE_CHECK(0 <= first && first <= last && last < cost.num_layers(),
               "layer range out of bounds");
  std::vector<double> bytes;
  bytes.reserve(last - first + 1);
  for (int x = first; x <= last; ++x) bytes.push_back(cost.ParameterBytes(x, x));
  return GroupGradientBuckets(bytes, first, cost.AllReduceBucketBytes());
}

std::vector<GradBucket> GroupGradientBuckets(const std::vector<double>& layer_bytes, int first,
                                             double cap) {
  DAPPLE_CHECK(!layer_bytes.empty(), "no layers to bucket");
  DAPPLE_CHECK(cap > 0, "the allreduce bucket size must be positive");
  const int last = first + static_cast<int>(layer_bytes.size()) - 1;
  std::vector<GradBucket> out;
  // Two buckets in a row hold more than `cap` (the second's first layer did not fit the
  // first, or the first was full): at most 2 x total / cap + 2 buckets, reserved at once.
  double total = 0;
  for (double p : layer_bytes) total += p;
  out.reserve(std::min(layer_bytes.size(), static_cast<size_t>(2 * total / cap) + 2));
  GradBucket open{last, last, 0.0};  // being filled; its first_layer moves down
  bool has_layers = false;
  for (int x = last; x >= first; --x) {
    const double p = layer_bytes[x - first];
    if (open.bytes > 0 && open.bytes + p > cap) {  // x would overflow it
      out.push_back(open);
      open = {x, x, 0.0};
      has_layers = false;
    }
    open.first_layer = x;
    open.bytes += p;
    has_layers = true;
    if (open.bytes >= cap) {  // full: the next layer starts a new one
      out.push_back(open);
      open = {x - 1, x - 1, 0.0};
      has_layers = false;
    }
  }
  if (has_layers) {
    if (open.bytes > 0 || out.empty()) {
      out.push_back(open);
    } else {  // only parameter-free layers left: they join the bucket above them
      out.back().first_layer = open.first_layer;
    }
  }
  return out;
}

std::vector<double> BucketAllReduceMs(const CostModel& cost, const std::vector<GradBucket>& buckets,
                                      const std::vector<int>& devices, bool sharded) {
  std::vector<double> ms;
  ms.reserve(buckets.size());
  for (const GradBucket& b : buckets)
    ms.push_back(sharded ? cost.ReduceScatterMs(b.first_layer, b.last_layer, devices)
                         : cost.AllReduceMs(b.first_layer, b.last_layer, devices));
  return ms;
}

double ExposedAllReduceMs(const CostModel& cost, const std::vector<GradBucket>& buckets,
                          const std::vector<double>& bucket_ms, double samples, int device,
                          bool split_backward) {
  DAPPLE_CHECK(!buckets.empty() && buckets.size() == bucket_ms.size());
  const int last = buckets.front().last_layer;  // buckets.back() starts at the stage's first
  return BucketsLeftAfter(bucket_ms, [&](int k) {
    const int from = buckets[k].first_layer;
    return split_backward ? cost.BackwardWeightMs(from, last, samples, device)
                          : cost.BackwardMs(from, last, samples, device);
  });
}

}  // namespace dapple
