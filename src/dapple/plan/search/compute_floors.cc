// The least compute of each layer: see compute_floors.h.
#include "dapple/plan/search/compute_floors.h"

#include <algorithm>
#include <limits>

namespace dapple {
namespace {

// One device of each kind (CostModel::DeviceKind): the devices' costs are theirs.
std::vector<int> OnePerKind(const CostModel& cost) {
  std::vector<int> kinds, devices;
  for (int d = 0; d < cost.num_devices(); ++d) {
    const int k = cost.DeviceKind(d);
    if (std::find(kinds.begin(), kinds.end(), k) != kinds.end()) continue;
    kinds.push_back(k);
    devices.push_back(d);
  }
  return devices;
}

}  // namespace

ComputeFloors ComputeFloorsFor(const CostModel& cost, int m) {
  const int N = cost.num_devices(), L = cost.num_layers();
  const std::vector<int> devices = OnePerKind(cost);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  ComputeFloors f;
  f.forward.assign(L + 1, 0);
  f.backward.assign(L + 1, 0);
  f.work.assign(L + 1, 0);
  for (int l = 0; l < L; ++l) {
    double fwd = kInf, bwd = kInf, per_sample = kInf, slowest_replica = kInf;
    // n replicas of a micro-batch get slices of floor(m / n) or ceil(m / n) samples
    // (SliceOf): each ceiling once, with the slice one sample smaller.
    for (int n = 1; n <= std::min(m, N);) {
      const int ceil = (m + n - 1) / n;
      for (int slice = ceil; slice >= std::max(1, ceil - 1); --slice) {
        for (int d : devices) {
          const double F = cost.ForwardMs(l, l, slice, d), B = cost.BackwardMs(l, l, slice, d);
          const double I = cost.BackwardInputMs(l, l, slice, d);
          const double W = cost.BackwardWeightMs(l, l, slice, d);
          fwd = std::min(fwd, F);
          bwd = std::min(bwd, std::min(B, I));
          per_sample = std::min(per_sample, (F + std::min(B, I + W)) / slice);
          // The replica with the largest slice: F + B of ceil(m / n) samples.
          if (slice == ceil) slowest_replica = std::min(slowest_replica, F + std::min(B, I + W));
        }
      }
      if (ceil == 1) break;
      n = (m + ceil - 2) / (ceil - 1);  // the fewest replicas with a smaller ceiling
    }
    const double work = m * per_sample;  // the slices' compute, summed, at the least per sample
    f.busiest = std::max(f.busiest, slowest_replica);
    f.forward[l + 1] = f.forward[l] + fwd;
    f.backward[l + 1] = f.backward[l] + bwd;
    f.work[l + 1] = f.work[l] + work;
  }
  return f;
}

double MicroBatchLowerBound(const CostModel& cost, int global_batch, int m) {
  const int L = cost.num_layers(), M = global_batch / m;
  const ComputeFloors f = ComputeFloorsFor(cost, m);
  const double computing = std::min<double>(cost.num_devices(), static_cast<double>(L) * m);
  return std::max({M * f.work[L] / computing, f.forward[L] + f.backward[L], M * f.busiest});
}

}  // namespace dapple
