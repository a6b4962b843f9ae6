// What is counted on a schedule's lists, kept once per process by shape (kind, stages,
// micro-batches).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "dapple/common/schedule_kind.h"

namespace dapple {

// The planner asks such figures (peaks of micro-batches in flight, the forwards that open a
// list) for every stage of many shapes, from threads that live for one search each, and a
// shape's figures come from making its whole lists: so they are kept once per process. At
// most kMaxShapes shapes are kept, and all are dropped when one more would pass that; the
// figures are a function of the shape, so dropping them costs time only. Thread-safe: two
// threads asking for one new shape may both make it, alike. Meant as a function-local static.
template <typename T>
class ShapeMemo {
 public:
  // The figures of (kind, num_stages, num_micro_batches), from make() (unlocked) when not kept.
  template <typename Make>
  std::shared_ptr<const T> Get(ScheduleKind kind, int num_stages, int num_micro_batches,
                               Make make) {
    const std::tuple<ScheduleKind, int, int> key{kind, num_stages, num_micro_batches};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = known_.find(key); it != known_.end()) return it->second;
    }
    auto made = std::make_shared<const T>(make());
    std::lock_guard<std::mutex> lock(mu_);
    if (known_.size() >= kMaxShapes) known_.clear();
    return known_.try_emplace(key, std::move(made)).first->second;
  }

 private:
  static constexpr size_t kMaxShapes = 1024;
  std::mutex mu_;
  std::map<std::tuple<ScheduleKind, int, int>, std::shared_ptr<const T>> known_;
};

}  // namespace dapple
