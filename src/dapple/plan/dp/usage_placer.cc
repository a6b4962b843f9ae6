// Placement from one usage: see usage_placer.h.
#include "dapple/plan/dp/usage_placer.h"

#include <algorithm>

#include "dapple/common/error.h"

namespace dapple {

UsagePlacer::UsagePlacer(const Cluster& cluster) : cluster_(cluster) {
  int first = 0;
  for (const ServerSpec& s : cluster.servers) {
    server_first_.push_back(first);
    first += s.devices;
    max_size_ = std::max(max_size_, s.devices);
  }
  fresh_fit_.assign(max_size_ + 1, -1);
  partial_with_.assign(max_size_ + 1, -1);
  with_free_.resize(max_size_ + 1);
  count_free_.assign(max_size_ + 1, 0);
}

void UsagePlacer::Reset(const std::vector<int>& usage) {
  const int servers = cluster_.num_servers();
  DAPPLE_CHECK(static_cast<int>(usage.size()) == servers);
  usage_ = usage;
  free_.resize(servers);
  fresh_.clear();
  partial_.clear();
  total_free_ = 0;
  std::fill(fresh_fit_.begin(), fresh_fit_.end(), -1);
  std::fill(partial_with_.begin(), partial_with_.end(), -1);
  for (std::vector<int>& w : with_free_) w.clear();
  std::fill(count_free_.begin(), count_free_.end(), 0);
  int covered = 0;  // fresh_fit_[1..covered] are set
  for (int s = 0; s < servers; ++s) {
    const int f = cluster_.servers[s].devices - usage[s];
    DAPPLE_CHECK(f >= 0);
    free_[s] = f;
    total_free_ += f;
    ++count_free_[f];
    if (f == 0) continue;
    with_free_[f].push_back(s);
    if (usage[s] == 0) {
      fresh_.push_back(s);
      for (; covered < f; ++covered) fresh_fit_[covered + 1] = s;
    } else {
      partial_.push_back(s);
      if (partial_with_[f] < 0) partial_with_[f] = s;
    }
  }
}

void UsagePlacer::Fill(const std::vector<int>& servers, int& need, Take& take) const {
  for (int s : servers) {
    if (need == 0) return;
    const int t = std::min(need, free_[s]);
    take.emplace_back(s, t);
    need -= t;
  }
}

bool UsagePlacer::Place(int n, PlacementPolicy policy, Take& take) const {
  DAPPLE_CHECK(n >= 1);
  take.clear();
  if (total_free_ < n) return false;
  // BestFit of placement.cc: the partly used server with the fewest free devices that
  // holds n (ties: the first), or -1.
  auto best_fit = [&] {
    for (int v = n; v <= max_size_; ++v)
      if (partial_with_[v] >= 0) return partial_with_[v];
    return -1;
  };
  int need = n;
  switch (policy) {
    case PlacementPolicy::kFreshFirst: {
      if (n <= max_size_ && fresh_fit_[n] >= 0) {
        take.emplace_back(fresh_fit_[n], n);
        return true;
      }
      if (int s = n <= max_size_ ? best_fit() : -1; s >= 0) {
        take.emplace_back(s, n);
        return true;
      }
      Fill(fresh_, need, take);
      Fill(partial_, need, take);
      std::sort(take.begin(), take.end());
      break;
    }
    case PlacementPolicy::kAppendFirst: {
      if (int s = n <= max_size_ ? best_fit() : -1; s >= 0) {
        take.emplace_back(s, n);
        return true;
      }
      Fill(partial_, need, take);
      Fill(fresh_, need, take);
      std::sort(take.begin(), take.end());
      break;
    }
    case PlacementPolicy::kScatterFirst: {
      // placement.cc's levels: the smallest level L whose devices above it number at most
      // n; every server gives its devices above L, then the servers with at least L free
      // give one more each, lowest id first, while some are missing.
      auto above = [&](int level) {
        long long t = 0;
        for (int v = level + 1; v <= max_size_; ++v) t += count_free_[v] * (v - level);
        return t;
      };
      int level = 0;
      while (above(level) > need) ++level;
      int extra = need - static_cast<int>(above(level));
      // The servers that give: those above the level, and (for the extra ones) the first
      // `extra` of those at the level, which are the only ones at it that can be reached.
      scratch_.clear();
      for (int v = level + 1; v <= max_size_; ++v)
        scratch_.insert(scratch_.end(), with_free_[v].begin(), with_free_[v].end());
      if (level > 0) {
        const std::vector<int>& at = with_free_[level];
        scratch_.insert(scratch_.end(), at.begin(),
                        at.begin() + std::min<size_t>(at.size(), std::max(extra, 0)));
      }
      std::sort(scratch_.begin(), scratch_.end());
      for (int s : scratch_) {
        int t = std::max(0, free_[s] - level);
        if (level > 0 && extra > 0) {  // free_[s] >= level for every server listed
          ++t;
          --extra;
        }
        if (t > 0) take.emplace_back(s, t);
        need -= t;
      }
      break;
    }
  }
  DAPPLE_CHECK(need == 0);
  return true;
}

void UsagePlacer::DevicesOf(const Take& take, std::vector<int>& devices) const {
  devices.clear();
  for (const auto& [s, t] : take) {
    const int first = server_first_[s] + usage_[s];
    for (int k = 0; k < t; ++k) devices.push_back(first + k);
  }
}

}  // namespace dapple
