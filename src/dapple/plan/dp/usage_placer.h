// Placement from one usage (Note [Placement from one usage]): the DP's fast path of
// PlaceCountsInto (placement.h) for many stage sizes and policies on the same usage.
#pragma once

#include <utility>
#include <vector>

#include "dapple/format/cluster.h"
#include "dapple/plan/dp/placement.h"

namespace dapple {

// Note [Placement from one usage]
// The DP tries every replica count and policy on each state's usage; PlaceCountsInto
// derives the free devices, the fresh and the partly used servers from the usage each
// time, O(servers), and returns a count per server. UsagePlacer derives them once per
// usage (Reset) and answers each placement with only the servers it takes from, in time
// about the number of those servers (Place), from tables by free count: the first fresh
// server with room for v devices, the first partly used one with exactly v free, the
// servers with v free in id order. Its counts are PlaceCountsInto's
// (tests/plan/usage_placer_test.cc).
class UsagePlacer {
 public:
  using Take = std::vector<std::pair<int, int>>;  // (server, devices > 0), ascending server

  explicit UsagePlacer(const Cluster& cluster);  // keeps a reference

  // REQUIRES: usage.size() == cluster.num_servers(), 0 <= usage[s] <= devices of s.
  void Reset(const std::vector<int>& usage);

  // PlaceCountsInto(cluster, usage, n, policy) as its non-zero counts; false when fewer
  // than n devices are free. REQUIRES: n >= 1.
  bool Place(int n, PlacementPolicy policy, Take& take) const;

  // The device ids of `take` after the usage's taken ones (DevicesOf's order).
  void DevicesOf(const Take& take, std::vector<int>& devices) const;

  int total_free() const { return total_free_; }

 private:
  // Appends up to `need` devices of `servers` (in order, each filled) to take.
  void Fill(const std::vector<int>& servers, int& need, Take& take) const;

  const Cluster& cluster_;
  std::vector<int> server_first_;  // first device id of each server
  int max_size_ = 0;               // the largest server
  std::vector<int> usage_, free_;
  std::vector<int> fresh_, partial_;  // servers with free devices, by id
  int total_free_ = 0;
  std::vector<int> fresh_fit_;               // [v]: the first fresh server with >= v free, or -1
  std::vector<int> partial_with_;            // [v]: the first partly used server with v free, or -1
  std::vector<std::vector<int>> with_free_;  // [v]: the servers with v free, by id
  std::vector<long long> count_free_;        // [v]: how many servers have v free
  mutable std::vector<int> scratch_;
};

}  // namespace dapple
