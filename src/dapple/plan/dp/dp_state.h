// The DP's state keys (Note [Canonical usage states]): which per-server usages the DAPPLE DP
// treats as one state, as small ids in hash tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "dapple/format/cluster.h"

namespace dapple {

// A hash of a vector of ints (for the DP's tables keyed by usages and device lists).
struct IntsHash {
  size_t operator()(const std::vector<int>& v) const;
};

// Note [Canonical usage states]
// A DP state is "the layers from block i on are planned, on the devices taken as `usage`
// (devices per server)". When all servers are identical (IdenticalServers), servers are
// interchangeable and states whose usages are permutations of each other are one state:
// the key is the histogram "how many servers have k devices taken", k = 0..server size,
// which is server size + 1 ints whatever the server count (a sorted usage vector is the
// same multiset, but 1024 ints long on 1024 servers). Otherwise the key is the usage
// vector itself. The DP keeps, per key, the suffixes with the best scores; the suffix's
// own usage (which servers) is kept with it, since placement and transfers depend on it.
// Ids are handed out in the order keys are first seen, so that the DP visits states in
// an order that does not depend on hashing.
class UsageKeys {
 public:
  explicit UsageKeys(const Cluster& cluster);

  // The canonical key of `usage` (size num_servers).
  std::vector<int> KeyOf(const std::vector<int>& usage) const;

  // The id of the state of `usage`: 0, 1, 2, ... in the order their keys are first seen.
  int IdOf(const std::vector<int>& usage);
  // The same from the key itself (KeyOf's), for a caller that updates keys as usages change.
  int IdOfKey(const std::vector<int>& key);

  size_t size() const { return ids_.size(); }
  bool symmetric() const { return symmetric_; }

 private:
  bool symmetric_ = false;
  int server_size_ = 0;
  std::unordered_map<std::vector<int>, int, IntsHash> ids_;
  std::vector<int> key_;  // scratch of IdOf
};

// Note [Usages by incremental hash]
// The DP looks up per-usage memos for usages of up to 1024 servers once per new stage it
// tries; hashing the whole usage was O(servers) each time. UsageHasher's hash is a sum
// over servers of a fixed pseudo-random number per (server, devices taken) (Zobrist
// hashing), so a new stage moves it by the servers it takes from only. The table compares
// the usages themselves on a hash match, so the hash decides nothing but speed.
class UsageHasher {
 public:
  explicit UsageHasher(const Cluster& cluster);
  uint64_t Of(const std::vector<int>& usage) const;  // O(servers)
  // The hash after server s went from `from` to `to` devices taken.
  uint64_t Moved(uint64_t hash, int s, int from, int to) const {
    return hash - z_[s * stride_ + from] + z_[s * stride_ + to];
  }

 private:
  int stride_ = 1;  // largest server + 1
  std::vector<uint64_t> z_;
};

// Values by usage, found by a UsageHasher hash; references stay valid as values are added.
template <typename V>
class UsageTable {
 public:
  // The value of `usage` (whose hash is `hash`), default-made on first use.
  V& At(uint64_t hash, const std::vector<int>& usage) {
    auto [it, added] = first_.try_emplace(hash, -1);
    int at = it->second;
    for (; at >= 0; at = slots_[at].next)
      if (slots_[at].usage == usage) return slots_[at].value;
    slots_.push_back({usage, V{}, it->second});
    it->second = static_cast<int>(slots_.size()) - 1;
    return slots_.back().value;
  }

 private:
  struct Slot {
    std::vector<int> usage;
    V value;
    int next;  // the slot of the same hash added before, or -1
  };
  std::unordered_map<uint64_t, int> first_;
  std::deque<Slot> slots_;
};

}  // namespace dapple
