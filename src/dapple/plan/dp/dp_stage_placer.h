// Where the DAPPLE DP puts a new stage (internal to plan/): every replica count under every
// placement policy (and server order, on mixed clusters) on a suffix's usage, the devices
// that gives, the usage it leaves and that usage's state id (Note [Canonical usage
// states] in dp_state.h).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "dapple/format/cluster.h"
#include "dapple/plan/dp/dp_state.h"
#include "dapple/plan/dp/placement.h"
#include "dapple/plan/dp/usage_placer.h"

namespace dapple::internal {

// A new stage in front of a suffix: its devices and what it leaves.
struct NewStage {
  int replicas = 0;
  size_t placement = 0;      // index into DpStagePlacer's placements
  UsagePlacer::Take take;    // devices taken per server (non-zero counts, by server)
  std::vector<int> devices;  // ascending by server, fastest first on mixed clusters
  std::vector<int> usage;    // devices taken per server with the stage
  uint64_t usage_hash = 0;   // UsageHasher's hash of `usage`
  int state = 0;             // UsageKeys' id of `usage`
  int free_after = 0;        // devices left free
};

class DpStagePlacer {
 public:
  explicit DpStagePlacer(const Cluster& cluster);  // keeps a reference

  size_t size() const { return placements_.size(); }  // placements tried per count
  const UsageHasher& hasher() const { return hasher_; }
  // The id of the empty usage (no device taken): the DP's first state.
  int EmptyState();

  // Sets the usage (of a suffix) that the next Place calls put a stage on.
  void Reset(const std::vector<int>& usage);
  // The stage of n replicas under placement `pi` on the usage of Reset, into `s`; false
  // when fewer than n devices are free, or when an earlier placement of the same n (a lower
  // pi since the last Reset) took the same devices. Call with pi = 0, 1, ... for each n.
  bool Place(int n, size_t pi, NewStage& s);

  // The devices that placement `pi` of n replicas takes on `usage`, with the counts it
  // adds to each server (for a suffix rebuilt from its parent: the same as Place's).
  std::vector<int> Replay(const std::vector<int>& usage, int n, size_t pi,
                          std::vector<int>& counts) const;
  // The head stage of a DP score: n devices placed fresh-first on `usage`, fastest first.
  std::vector<int> HeadDevices(const std::vector<int>& usage, int n) const;

 private:
  std::optional<std::vector<int>> Counts(const std::vector<int>& usage, int n, size_t pi) const;

  const Cluster& cluster_;
  std::vector<ServerOrder> orders_;  // Note [Placement on mixed clusters]
  bool mixed_ = false;
  std::vector<std::pair<PlacementPolicy, size_t>> placements_;  // (policy, server order)
  UsagePlacer placer_;                                          // Note [Placement from one usage]
  UsageKeys keys_;
  UsageHasher hasher_;  // Note [Usages by incremental hash]
  // Of the usage of Reset: it, its hash and key; the takes of the current count by pi.
  std::vector<int> usage_, base_key_, key_, dense_;
  uint64_t base_hash_ = 0;
  int free_ = 0;
  std::vector<UsagePlacer::Take> takes_;
  std::vector<char> valid_;
};

}  // namespace dapple::internal
