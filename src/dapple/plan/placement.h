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

// The device ids of `take[s]` devices on each server after the `usage[s]` taken ones,
// server by server, ascending.
std::vector<int> DevicesOf(const Cluster& cluster, const std::vector<int>& usage,
                           const std::vector<int>& take);

// True when every server has the same device count, memory and speed, so that servers
// are interchangeable for the planners' search.
bool IdenticalServers(const Cluster& cluster);

// Convenience: PlaceCounts then DevicesOf (empty when nothing fits).
std::vector<int> PlaceDevices(const Cluster& cluster, const std::vector<int>& usage, int n,
                              PlacementPolicy policy);

}  // namespace dapple
