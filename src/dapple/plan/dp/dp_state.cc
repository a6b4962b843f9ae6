// The DP's state keys: see dp_state.h.
#include "dapple/plan/dp/dp_state.h"

#include <algorithm>
#include <cstdint>

#include "dapple/common/error.h"
#include "dapple/plan/dp/placement.h"

namespace dapple {

size_t IntsHash::operator()(const std::vector<int>& v) const {
  // 64-bit FNV-1a over the ints, then a final mix (splitmix64's) for the low bits.
  uint64_t h = 1469598103934665603ull ^ v.size();
  for (int x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  return static_cast<size_t>(h);
}

UsageKeys::UsageKeys(const Cluster& cluster) : symmetric_(IdenticalServers(cluster)) {
  for (const ServerSpec& s : cluster.servers) server_size_ = std::max(server_size_, s.devices);
}

std::vector<int> UsageKeys::KeyOf(const std::vector<int>& usage) const {
  if (!symmetric_) return usage;
  std::vector<int> key(server_size_ + 1, 0);
  for (int u : usage) {
    DAPPLE_CHECK(u >= 0 && u <= server_size_);
    ++key[u];
  }
  return key;
}

int UsageKeys::IdOf(const std::vector<int>& usage) {
  if (symmetric_) {
    key_.assign(server_size_ + 1, 0);
    for (int u : usage) ++key_[u];
  } else {
    key_ = usage;
  }
  return IdOfKey(key_);
}

int UsageKeys::IdOfKey(const std::vector<int>& key) {
  auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  const int id = static_cast<int>(ids_.size());
  ids_.emplace(key, id);
  return id;
}

UsageHasher::UsageHasher(const Cluster& cluster) {
  for (const ServerSpec& s : cluster.servers) stride_ = std::max(stride_, s.devices + 1);
  z_.resize(static_cast<size_t>(cluster.num_servers()) * stride_);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (uint64_t& z : z_) {  // splitmix64: fixed, so runs hash alike
    x += 0x9e3779b97f4a7c15ull;
    uint64_t v = x;
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    z = v ^ (v >> 31);
  }
}

uint64_t UsageHasher::Of(const std::vector<int>& usage) const {
  uint64_t h = 0;
  for (size_t s = 0; s < usage.size(); ++s) h += z_[s * stride_ + usage[s]];
  return h;
}

}  // namespace dapple
