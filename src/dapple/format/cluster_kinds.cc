// Kinds of device of a mixed cluster: see cluster_kinds.h.
#include "dapple/format/cluster_kinds.h"

#include <fmt/format.h>

#include <algorithm>

namespace dapple {
bool AlikeDevices(const DeviceSpec& a, const DeviceSpec& b) {
  return a.speed == b.speed && a.memory_bytes == b.memory_bytes &&
         a.process_memory_bytes == b.process_memory_bytes;
}

std::string IdRanges(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j > i ? fmt::format("{}-{}", ids[i], ids[j]) : fmt::format("{}", ids[i]);
    i = j + 1;
  }
  return out;
}

std::vector<DeviceKind> DeviceKinds(const Cluster& c) {
  std::vector<DeviceKind> kinds;
  for (int s = 0; s < c.num_servers(); ++s) {
    const DeviceSpec& d = c.Device(c.FirstDeviceOf(s));
    auto it = std::find_if(kinds.begin(), kinds.end(),
                           [&](const DeviceKind& k) { return AlikeDevices(k.spec, d); });
    if (it == kinds.end()) {
      kinds.push_back({d, {s}});
    } else {
      it->servers.push_back(s);
    }
  }
  // Stable: kinds alike in speed and usable memory stay in the order first listed.
  std::stable_sort(kinds.begin(), kinds.end(), [](const DeviceKind& a, const DeviceKind& b) {
    if (a.spec.speed != b.spec.speed) return a.spec.speed > b.spec.speed;
    return a.spec.memory_bytes - a.spec.process_memory_bytes >
           b.spec.memory_bytes - b.spec.process_memory_bytes;
  });
  return kinds;
}

std::string DeviceKindName(size_t k) {
  // More than 26 kinds is unlikely.
  return k < 26 ? std::string(1, static_cast<char>('A' + k)) : fmt::format("K{}", k);
}

bool MixedDevices(const Cluster& cluster) { return DeviceKinds(cluster).size() > 1; }

std::vector<std::string> DeviceKindLines(const Cluster& c, const Plan& plan) {
  const std::vector<DeviceKind> kinds = DeviceKinds(c);
  if (kinds.size() < 2) return {};
  std::vector<int> kind_of_server(c.num_servers());
  std::string line = "device kinds:";
  for (size_t k = 0; k < kinds.size(); ++k) {
    std::vector<int> devices;
    for (int s : kinds[k].servers) {
      kind_of_server[s] = static_cast<int>(k);
      for (int i = 0; i < c.servers[s].devices; ++i) devices.push_back(c.FirstDeviceOf(s) + i);
    }
    line += fmt::format("{} {} = speed {:g}, {:.1f} GB (devices {})", k == 0 ? "" : ";",
                        DeviceKindName(k), kinds[k].spec.speed, kinds[k].spec.memory_bytes / 1e9,
                        IdRanges(devices));
  }
  std::string stages = "stages on kinds:";
  for (int s = 0; s < plan.num_stages(); ++s) {
    std::vector<int> count(kinds.size(), 0);
    for (int d : plan.stages[s].devices) ++count[kind_of_server[c.ServerOf(d)]];
    std::string on;
    for (size_t k = 0; k < kinds.size(); ++k)
      if (count[k] > 0)
        on += fmt::format("{}{}{}", on.empty() ? "" : "+", DeviceKindName(k), count[k]);
    stages += fmt::format("{} {} {}", s == 0 ? "" : ",", s, on);
  }
  return {line, stages};
}

}  // namespace dapple
