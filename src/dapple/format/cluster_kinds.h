// The kinds of device of a mixed cluster (servers whose `device` overrides differ): which
// servers hold each kind, in a ranking that does not depend on how the file lists them,
// and the lines `dapple plan` prints about which kinds each stage runs on.
#pragma once

#include <string>
#include <vector>

#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"

namespace dapple {

struct DeviceKind {
  DeviceSpec spec;           // what every device of the kind is
  std::vector<int> servers;  // ascending
};

// Whether two devices are of one kind: the same speed, memory and process memory.
bool AlikeDevices(const DeviceSpec& a, const DeviceSpec& b);

// "0-7", "0-3,8-11": device (or server) ids as ranges of consecutive ids, in the given order.
std::string IdRanges(const std::vector<int>& ids);

// The cluster's kinds of device (servers alike in speed, memory and process memory), the
// fastest first, then the most memory left to a stage (memory less process memory), then
// the first listed. One kind when the cluster is not mixed.
std::vector<DeviceKind> DeviceKinds(const Cluster& cluster);

// True when the cluster has more than one kind of device.
bool MixedDevices(const Cluster& cluster);

// The letter of kind k of DeviceKinds (A the fastest): A..Z, then K26, K27, ...
std::string DeviceKindName(size_t k);

// For a mixed cluster, two lines naming the kinds by letter (A the fastest) and saying on
// how many devices of each kind every stage of `plan` runs, e.g.
//   device kinds: A = speed 2, 32.0 GB (devices 0-7); B = speed 1, 16.0 GB (devices 8-15)
//   stages on kinds: 0 A5+B6, 1 A2+B2, 2 A1
// Empty when the cluster is not mixed. REQUIRES: the plan's devices exist in the cluster.
std::vector<std::string> DeviceKindLines(const Cluster& cluster, const Plan& plan);

}  // namespace dapple
