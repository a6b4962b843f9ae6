// Layer coarsening and replica-count lists: see layer_blocks.h.
#include "dapple/plan/dp/layer_blocks.h"

#include <algorithm>
#include <cmath>

#include "dapple/common/error.h"

namespace dapple {

std::vector<int> BlockEnds(const CostModel& cost, int max_blocks) {
  DAPPLE_CHECK(max_blocks >= 1);
  const int n = cost.num_layers();
  std::vector<int> ends;
  if (n <= max_blocks) {
    for (int i = 0; i < n; ++i) ends.push_back(i);
    return ends;
  }
  const double pbs = cost.profile_batch_size();
  // cum[i] = compute of layers 0..i.
  std::vector<double> cum(n);
  double total = 0;
  for (int i = 0; i < n; ++i) {
    total += cost.ForwardMs(i, i, pbs, 0) + cost.BackwardMs(i, i, pbs, 0);
    cum[i] = total;
  }
  const double block = total / max_blocks;
  int prev = -1;
  for (int k = 1; k < max_blocks; ++k) {
    const double target = block * k;
    int best = -1;
    double best_cut = 0, best_dist = 0;
    for (int i = prev + 1; i < n - 1; ++i) {
      double dist = std::abs(cum[i] - target);
      if (cum[i] < target - block / 2) continue;
      if (cum[i] > target + block / 2) break;
      double cut = cost.CutBytes(i, pbs);
      if (best < 0 || cut < best_cut || (cut == best_cut && dist < best_dist)) {
        best = i;
        best_cut = cut;
        best_dist = dist;
      }
    }
    if (best < 0) {  // no boundary in the window (one huge layer): nearest one after prev
      for (int i = prev + 1; i < n - 1; ++i) {
        if (cum[i] >= target) {
          best = i;
          break;
        }
      }
    }
    if (best < 0 || best <= prev) continue;
    ends.push_back(best);
    prev = best;
  }
  ends.push_back(n - 1);
  return ends;
}

std::vector<int> ReplicaCounts(int max_count, int server_size) {
  std::vector<int> counts;
  if (max_count <= 16) {
    for (int c = 1; c <= max_count; ++c) counts.push_back(c);
    return counts;
  }
  for (int c = 1; c <= 8; ++c) counts.push_back(c);
  for (int c = 16; c <= max_count; c *= 2) counts.push_back(c);
  if (server_size > 1) {
    if (max_count <= 64) {  // every multiple of the server size
      for (int c = server_size; c <= max_count; c += server_size) counts.push_back(c);
    } else {  // the server size times a power of two
      for (int c = server_size; c <= max_count; c *= 2) counts.push_back(c);
    }
  }
  counts.push_back(max_count);
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

}  // namespace dapple
