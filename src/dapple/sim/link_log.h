// The contention-free pass's record of when each transfer held its links, and the check
// that no two transfers met on one (Note [Transfers that never meet] in event_engine.cc).
// Internal to dapple_sim.
#pragma once

#include <vector>

#include "dapple/sim/event_engine.h"

namespace dapple::internal {

class LinkLog {
 public:
  // Forgets every transfer; `setup`'s routes, at most `per_route` transfers each.
  void Reset(const EngineSetup& setup, int per_route);
  // A transfer on `route` held its links over [start, finish). A route's transfers come in
  // the order their senders sent them, so their starts never decrease. Returns false when
  // it met a transfer logged before on a route that shares a resource with it (the same
  // route included): one started before the other finished, or both at the same time.
  bool Add(int route, double start, double finish);

 private:
  struct Interval {
    double start, finish;
  };
  int per_route_ = 0;
  std::vector<int> count_;      // per route
  std::vector<Interval> held_;  // [route * per_route + k]
  std::vector<std::vector<int>> by_resource_;
  std::vector<int> first_, neighbours_;  // route r's: neighbours_[first_[r] .. first_[r + 1])
};

}  // namespace dapple::internal
