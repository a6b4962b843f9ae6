// LinkLog: see link_log.h.
#include "dapple/sim/link_log.h"

#include <algorithm>

#include "dapple/common/error.h"

namespace dapple::internal {

void LinkLog::Reset(const EngineSetup& setup, int per_route) {
  const int routes = static_cast<int>(setup.routes.size());
  per_route_ = per_route;
  count_.assign(routes, 0);
  held_.resize(static_cast<size_t>(routes) * per_route);
  // The routes of each resource, then each route's neighbours: the other routes that
  // share a resource with it, each once.
  by_resource_.assign(setup.num_resources, {});
  for (int r = 0; r < routes; ++r)
    for (int x : setup.routes[r].resources) by_resource_[x].push_back(r);
  first_.assign(routes + 1, 0);
  neighbours_.clear();
  for (int r = 0; r < routes; ++r) {
    for (int x : setup.routes[r].resources)
      for (int q : by_resource_[x])
        if (q != r &&
            std::find(neighbours_.begin() + first_[r], neighbours_.end(), q) == neighbours_.end())
          neighbours_.push_back(q);
    first_[r + 1] = static_cast<int>(neighbours_.size());
  }
}

bool LinkLog::Add(int route, double start, double finish) {
  int& n = count_[route];
  DAPPLE_CHECK(n < per_route_);
  Interval* held = held_.data() + static_cast<size_t>(route) * per_route_;
  if (n > 0 && (start < held[n - 1].finish || start == held[n - 1].start)) return false;
  held[n++] = {start, finish};
  // Against the transfers logged so far on the routes that share a resource: theirs are
  // in order of start and do not overlap, so only the last that starts before this one
  // can hold the link at its start, and the first that starts at or after it is the first
  // that could start inside it.
  for (int i = first_[route]; i < first_[route + 1]; ++i) {
    const int q = neighbours_[i];
    const Interval* other = held_.data() + static_cast<size_t>(q) * per_route_;
    const Interval* end = other + count_[q];
    const Interval* at = std::lower_bound(other, end, start,
                                          [](const Interval& a, double s) { return a.start < s; });
    if (at != end && (at->start < finish || at->start == start)) return false;
    if (at != other && start < (at - 1)->finish) return false;
  }
  return true;
}

}  // namespace dapple::internal
