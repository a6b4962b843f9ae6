// Placement policies: see placement.h for the exact rule of each.
#include "dapple/plan/dp/placement.h"

#include <algorithm>

#include "dapple/common/error.h"
#include "dapple/format/cluster_kinds.h"

namespace dapple {

std::string ToString(PlacementPolicy p) {
  switch (p) {
    case PlacementPolicy::kFreshFirst:
      return "fresh-first";
    case PlacementPolicy::kAppendFirst:
      return "append-first";
    case PlacementPolicy::kScatterFirst:
      return "scatter-first";
  }
  return "?";
}

std::vector<PlacementPolicy> AllPlacementPolicies() {
  return {PlacementPolicy::kFreshFirst, PlacementPolicy::kAppendFirst,
          PlacementPolicy::kScatterFirst};
}

namespace {

// Takes up to `need` devices from each server of `order` in turn, filling each.
void FillInOrder(const std::vector<int>& order, const std::vector<int>& free,
                 std::vector<int>& take, int& need) {
  for (int s : order) {
    if (need == 0) return;
    int t = std::min(need, free[s] - take[s]);
    take[s] += t;
    need -= t;
  }
}

// The server of `order` with the fewest free devices that still holds n (ties: the
// first), or -1.
int BestFit(const std::vector<int>& order, const std::vector<int>& free, int n) {
  int best = -1;
  for (int s : order)
    if (free[s] >= n && (best < 0 || free[s] < free[best])) best = s;
  return best;
}

}  // namespace

bool PlaceCountsInto(const Cluster& cluster, const std::vector<int>& usage, int n,
                     PlacementPolicy policy, std::vector<int>& take) {
  const int servers = cluster.num_servers();
  DAPPLE_CHECK(static_cast<int>(usage.size()) == servers && n >= 1);
  thread_local std::vector<int> free, fresh, partial;  // scratch: no allocation per call
  free.resize(servers);
  fresh.clear();
  partial.clear();
  int total_free = 0;
  for (int s = 0; s < servers; ++s) {
    free[s] = cluster.servers[s].devices - usage[s];
    DAPPLE_CHECK(free[s] >= 0);
    total_free += free[s];
    if (free[s] == 0) continue;
    (usage[s] == 0 ? fresh : partial).push_back(s);
  }
  if (total_free < n) return false;
  take.assign(servers, 0);
  int need = n;
  switch (policy) {
    case PlacementPolicy::kFreshFirst: {
      for (int s : fresh) {
        if (free[s] >= n) {  // the whole stage inside one fresh server
          take[s] = n;
          return true;
        }
      }
      if (int s = BestFit(partial, free, n); s >= 0) {  // or inside a partly used one
        take[s] = n;
        return true;
      }
      FillInOrder(fresh, free, take, need);
      FillInOrder(partial, free, take, need);
      break;
    }
    case PlacementPolicy::kAppendFirst:
      if (int s = BestFit(partial, free, n); s >= 0) {
        take[s] = n;
        return true;
      }
      FillInOrder(partial, free, take, need);
      FillInOrder(fresh, free, take, need);
      break;
    case PlacementPolicy::kScatterFirst: {
      // One device at a time from the server with the most free devices (ties: lowest id)
      // ends with every server that gave a device down to a level L or L-1: take each down
      // to the smallest L whose total is at most n, then one more from the servers at L,
      // lowest id first (O(servers x devices per server) instead of O(n x servers)).
      auto above = [&](int level) {
        int t = 0;
        for (int s = 0; s < servers; ++s) t += std::max(0, free[s] - level);
        return t;
      };
      int level = 0;
      while (above(level) > need) ++level;
      for (int s = 0; s < servers; ++s) {
        take[s] = std::max(0, free[s] - level);
        need -= take[s];
      }
      for (int s = 0; s < servers && need > 0; ++s) {
        if (free[s] >= level && level > 0) {
          ++take[s];
          --need;
        }
      }
      break;
    }
  }
  DAPPLE_CHECK(need == 0);
  return true;
}

std::optional<std::vector<int>> PlaceCounts(const Cluster& cluster, const std::vector<int>& usage,
                                            int n, PlacementPolicy policy) {
  std::vector<int> take;
  if (!PlaceCountsInto(cluster, usage, n, policy, take)) return std::nullopt;
  return take;
}

std::vector<int> DevicesOf(const Cluster& cluster, const std::vector<int>& usage,
                           const std::vector<int>& take) {
  std::vector<int> devices;
  DevicesOf(cluster, usage, take, devices);
  return devices;
}

void DevicesOf(const Cluster& cluster, const std::vector<int>& usage, const std::vector<int>& take,
               std::vector<int>& devices) {
  devices.clear();
  for (int s = 0, server_first = 0; s < cluster.num_servers(); ++s) {
    const int first = server_first + usage[s];
    for (int k = 0; k < take[s]; ++k) devices.push_back(first + k);
    server_first += cluster.servers[s].devices;  // FirstDeviceOf(s + 1), without its O(s) scan
  }
}

bool IdenticalServers(const Cluster& c) {
  for (int s = 1; s < c.num_servers(); ++s) {
    if (c.servers[s].devices != c.servers[0].devices) return false;
    const DeviceSpec& a = c.servers[s].device ? *c.servers[s].device : c.device;  // c.Device
    const DeviceSpec& b = c.servers[0].device ? *c.servers[0].device : c.device;  // in O(1)
    if (!AlikeDevices(a, b)) return false;
  }
  return true;
}

std::vector<int> PlaceDevices(const Cluster& cluster, const std::vector<int>& usage, int n,
                              PlacementPolicy policy) {
  auto take = PlaceCounts(cluster, usage, n, policy);
  if (!take) return {};
  return DevicesOf(cluster, usage, *take);
}

std::vector<ServerOrder> ServerOrders(const Cluster& c) {
  const std::vector<DeviceKind> kinds = DeviceKinds(c);  // ranked as the Note says
  std::vector<ServerOrder> orders;
  for (size_t lead = 0; lead < kinds.size(); ++lead) {
    ServerOrder o;
    o.servers = kinds[lead].servers;
    for (size_t k = 0; k < kinds.size(); ++k)
      if (k != lead)
        o.servers.insert(o.servers.end(), kinds[k].servers.begin(), kinds[k].servers.end());
    o.permuted = c;
    for (size_t i = 0; i < o.servers.size(); ++i) o.permuted.servers[i] = c.servers[o.servers[i]];
    orders.push_back(std::move(o));
  }
  return orders;
}

std::optional<std::vector<int>> PlaceCountsInOrder(const ServerOrder& order,
                                                   const std::vector<int>& usage, int n,
                                                   PlacementPolicy policy) {
  const size_t servers = order.servers.size();
  DAPPLE_CHECK(usage.size() == servers);
  std::vector<int> permuted(servers);
  for (size_t i = 0; i < servers; ++i) permuted[i] = usage[order.servers[i]];
  auto take = PlaceCounts(order.permuted, permuted, n, policy);
  if (!take) return take;
  std::vector<int> by_id(servers);
  for (size_t i = 0; i < servers; ++i) by_id[order.servers[i]] = (*take)[i];
  return by_id;
}

void FastestFirst(const Cluster& cluster, std::vector<int>& devices) {
  std::vector<std::pair<double, int>> keyed;  // (-speed, id)
  for (int d : devices) keyed.emplace_back(-cluster.Device(d).speed, d);
  std::sort(keyed.begin(), keyed.end());
  for (size_t i = 0; i < devices.size(); ++i) devices[i] = keyed[i].second;
}

}  // namespace dapple
