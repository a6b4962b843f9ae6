// The three device-placement policies of DAPPLE (docs/design.md section 6): which free devices a
// new stage gets, given how many devices each server already gives to other stages.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dapple/format/cluster.h"

namespace dapple {

enum class PlacementPolicy {
  // Servers with nothing placed yet first: the first fresh server with room for the whole
  // stage; else the partly used server with room for it and the fewest free devices; else
  // fresh servers in order, each filled, then partly used servers in order.
  kFreshFirst,
  // Partly used servers first: the one with room for the whole stage and the fewest free
  // devices; else partly used servers in order, each filled, then fresh servers in order.
  kAppendFirst,
  // One device at a time from the server with the most free devices (ties: lowest id), so
  // the stage spreads evenly over the servers.
  kScatterFirst,
};

std::string ToString(PlacementPolicy p);  // "fresh-first", "append-first", "scatter-first"
std::vector<PlacementPolicy> AllPlacementPolicies();

// `usage[s]` devices of server s are taken; a server hands out its devices in id order, so
// the taken ones are always its first usage[s]. Returns how many devices the new stage
// takes on each server (size num_servers, sum n), or nullopt when fewer than n are free.
// REQUIRES: usage.size() == cluster.num_servers(), n >= 1.
std::optional<std::vector<int>> PlaceCounts(const Cluster& cluster, const std::vector<int>& usage,
                                            int n, PlacementPolicy policy);

// PlaceCounts into `take`; false (take unspecified) when fewer than n are free. Allocates
// nothing once `take` has its size: the DP places millions of stages.
bool PlaceCountsInto(const Cluster& cluster, const std::vector<int>& usage, int n,
                     PlacementPolicy policy, std::vector<int>& take);

// The device ids of `take[s]` devices on each server after the `usage[s]` taken ones,
// server by server, ascending.
std::vector<int> DevicesOf(const Cluster& cluster, const std::vector<int>& usage,
                           const std::vector<int>& take);
// The same into `devices` (replacing its contents).
void DevicesOf(const Cluster& cluster, const std::vector<int>& usage, const std::vector<int>& take,
               std::vector<int>& devices);

// True when every server has the same device count, memory and speed, so that servers
// are interchangeable for the planners' search.
bool IdenticalServers(const Cluster& cluster);

// Convenience: PlaceCounts then DevicesOf (empty when nothing fits).
std::vector<int> PlaceDevices(const Cluster& cluster, const std::vector<int>& usage, int n,
                              PlacementPolicy policy);

// Note [Placement on mixed clusters]: the policies prefer servers by their id, which on
// identical servers is no choice at all, but on a mixed cluster decides whether a stage
// lands on the fast or the slow devices. The planners therefore try each policy under
// each of ServerOrders: one per kind of device (format/cluster_kinds.h), that kind's
// servers first, then the other kinds in their ranking, each kind's servers in id order.
// Kinds are ranked fastest first (then the most memory), so the first order is the
// fastest devices first, and the orders do not depend on how the cluster file lists its
// servers. A cluster of one kind has the one order 0, 1, ..., S-1. A stage's devices are
// then listed fastest first (FastestFirst): replica j computes the j-th slice, and the
// first slices are the larger ones when the replicas do not divide the micro-batch
// (common/slicing.h).
struct ServerOrder {
  std::vector<int> servers;  // server ids, the preferred first
  Cluster permuted;          // the cluster with its servers in that order
};
std::vector<ServerOrder> ServerOrders(const Cluster& cluster);

// PlaceCounts with the servers in `order`: "in order", "the first" and ties follow it.
// Returns the counts by server id, like PlaceCounts.
std::optional<std::vector<int>> PlaceCountsInOrder(const ServerOrder& order,
                                                   const std::vector<int>& usage, int n,
                                                   PlacementPolicy policy);

// Orders a stage's devices the fastest first, then by id. O(devices x servers): for mixed
// clusters (on others it keeps ascending ids ascending).
void FastestFirst(const Cluster& cluster, std::vector<int>& devices);

}  // namespace dapple
