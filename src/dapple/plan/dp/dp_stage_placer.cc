// Where the DAPPLE DP puts a new stage: see dp_stage_placer.h.
#include "dapple/plan/dp/dp_stage_placer.h"

#include "dapple/common/error.h"

namespace dapple::internal {

DpStagePlacer::DpStagePlacer(const Cluster& cluster)
    : cluster_(cluster),
      orders_(ServerOrders(cluster)),
      mixed_(orders_.size() > 1),
      placer_(cluster),
      keys_(cluster),
      hasher_(cluster) {
  for (size_t o = 0; o < orders_.size(); ++o)
    for (PlacementPolicy policy : AllPlacementPolicies()) placements_.emplace_back(policy, o);
  takes_.resize(placements_.size());
  valid_.resize(placements_.size());
}

int DpStagePlacer::EmptyState() { return keys_.IdOf(std::vector<int>(cluster_.num_servers(), 0)); }

void DpStagePlacer::Reset(const std::vector<int>& usage) {
  usage_ = usage;
  if (!mixed_) placer_.Reset(usage);
  base_hash_ = hasher_.Of(usage);
  base_key_ = keys_.symmetric() ? keys_.KeyOf(usage) : std::vector<int>{};
  free_ = cluster_.num_devices();
  for (int u : usage) free_ -= u;
}

std::optional<std::vector<int>> DpStagePlacer::Counts(const std::vector<int>& usage, int n,
                                                      size_t pi) const {
  const auto& [policy, o] = placements_[pi];
  return mixed_ ? PlaceCountsInOrder(orders_[o], usage, n, policy)
                : PlaceCounts(cluster_, usage, n, policy);
}

bool DpStagePlacer::Place(int n, size_t pi, NewStage& s) {
  UsagePlacer::Take& take = takes_[pi];
  if (mixed_) {
    auto counts = Counts(usage_, n, pi);
    take.clear();
    if (counts)
      for (size_t v = 0; v < counts->size(); ++v)
        if ((*counts)[v] > 0) take.emplace_back(static_cast<int>(v), (*counts)[v]);
    valid_[pi] = counts.has_value();
  } else {
    valid_[pi] = placer_.Place(n, placements_[pi].first, take);
  }
  if (!valid_[pi]) return false;
  for (size_t q = 0; q < pi; ++q)
    if (valid_[q] && takes_[q] == take) return false;  // tried already
  s.replicas = n;
  s.placement = pi;
  s.take = take;
  if (mixed_) {
    dense_.assign(usage_.size(), 0);
    for (const auto& [v, t] : take) dense_[v] = t;
    DevicesOf(cluster_, usage_, dense_, s.devices);
    FastestFirst(cluster_, s.devices);
  } else {
    placer_.DevicesOf(take, s.devices);
  }
  s.usage = usage_;
  s.usage_hash = base_hash_;
  for (const auto& [v, t] : take) {
    s.usage[v] += t;
    s.usage_hash = hasher_.Moved(s.usage_hash, v, usage_[v], usage_[v] + t);
  }
  if (keys_.symmetric()) {  // the key of the usage with the servers taken from moved
    key_ = base_key_;
    for (const auto& [v, t] : take) {
      --key_[usage_[v]];
      ++key_[usage_[v] + t];
    }
    s.state = keys_.IdOfKey(key_);
  } else {
    s.state = keys_.IdOf(s.usage);
  }
  s.free_after = free_ - n;
  return true;
}

std::vector<int> DpStagePlacer::Replay(const std::vector<int>& usage, int n, size_t pi,
                                       std::vector<int>& counts) const {
  auto c = Counts(usage, n, pi);
  DAPPLE_CHECK(c.has_value());
  counts = std::move(*c);
  std::vector<int> devices = DevicesOf(cluster_, usage, counts);
  if (mixed_) FastestFirst(cluster_, devices);
  return devices;
}

std::vector<int> DpStagePlacer::HeadDevices(const std::vector<int>& usage, int n) const {
  std::vector<int> devices;
  if (mixed_) {
    auto counts = PlaceCountsInOrder(orders_[0], usage, n, PlacementPolicy::kFreshFirst);
    DAPPLE_CHECK(counts.has_value());
    devices = DevicesOf(cluster_, usage, *counts);
    FastestFirst(cluster_, devices);
  } else {
    std::vector<int> counts;
    DAPPLE_CHECK(PlaceCountsInto(cluster_, usage, n, PlacementPolicy::kFreshFirst, counts));
    DevicesOf(cluster_, usage, counts, devices);
  }
  return devices;
}

}  // namespace dapple::internal
