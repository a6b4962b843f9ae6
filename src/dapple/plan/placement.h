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
// The policies go through the servers in `order` (a permutation of the server ids; empty:
// 0, 1, ..., S-1): "in order", "the first" and ties follow it.
// REQUIRES: usage.size() == cluster.num_servers(), n >= 1.
std::optional<std::vector<int>> PlaceCounts(const Cluster& cluster, const std::vector<int>& usage,
                                            int n, PlacementPolicy policy,
                                            const std::vector<int>& order = {});

// The device ids of `take[s]` devices on each server after the `usage[s]` taken ones,
// the fastest first (the larger slices of a micro-batch go to them), then ascending.
std::vector<int> DevicesOf(const Cluster& cluster, const std::vector<int>& usage,
                           const std::vector<int>& take);

// Orders a stage's devices the fastest first, then by id (what DevicesOf returns).
void FastestFirst(const Cluster& cluster, std::vector<int>& devices);

// True when every server has the same device count, memory and speed, so that servers
// are interchangeable for the planners' search.
bool IdenticalServers(const Cluster& cluster);

// Note [Placement on mixed clusters]: the policies prefer servers by their order, which on
// identical servers is no choice at all, but on a mixed cluster decides whether a stage
// lands on the fast or the slow devices. The planners therefore try each policy with each
// of these orders: one per kind of device (format/cluster_kinds.h), that kind's servers
// first, then the other kinds in their ranking, each kind's servers in id order. Kinds are
// ranked fastest first (then the most memory), so the first order is the fastest devices
// first, and the orders do not depend on how the cluster file lists its servers. A
// cluster of one kind has the one order 0, 1, ..., S-1.
std::vector<std::vector<int>> ServerOrders(const Cluster& cluster);

// Convenience: PlaceCounts then DevicesOf (empty when nothing fits).
std::vector<int> PlaceDevices(const Cluster& cluster, const std::vector<int>& usage, int n,
                              PlacementPolicy policy, const std::vector<int>& order = {});

}  // namespace dapple
