// The event engine's waiting list (Note [Due and future transfers]). Internal to dapple_sim.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

namespace dapple::internal {

// A transfer in the waiting list, with what the list is ordered by (so that keeping it in
// order reads no Transfer): its ready time, then its rank among transfers ready at the same
// time (boundary, then micro-batch, then activations before gradients), (boundary * M +
// mb) * 2 + direction.
struct Waiting {
  double ready;
  long long rank;
  int id;
  int route;
  bool operator<(const Waiting& o) const {
    return ready != o.ready ? ready < o.ready : rank < o.rank;
  }
};

// Note [Due and future transfers]
// Transfers that hold resources wait, once their last sender sent them, until their
// resources are free; at each instant the engine starts, in priority order (Waiting's <),
// every one ready by then whose resources are free, and the next instant is the earliest
// ready time still to come (unless a finish comes first). Devices run ahead of the global
// time (Note [Lazy devices] in event_engine.cc), so most transfers join long before they
// are ready: one sorted list moved its long tail at every insertion and start. So those
// ready by now (due, usually few: the ones whose links are busy) are kept apart, sorted,
// from those still to come, which wait in a heap by priority; when time reaches their ready
// time they move, in priority order, to the end of the due ones (every due one is ready
// earlier). The engine sees the same transfers in the same order as with one list.
class WaitingTransfers {
 public:
  void Clear() {
    due_.clear();
    future_.clear();
  }
  void Add(const Waiting& w, double now) {
    if (w.ready <= now) {
      due_.insert(std::upper_bound(due_.begin(), due_.end(), w), w);
    } else {
      future_.push_back(w);
      std::push_heap(future_.begin(), future_.end(), Later);
    }
  }
  // Moves the transfers ready by `now` to the due ones (time moved on to `now`).
  void Advance(double now) {
    while (!future_.empty() && future_.front().ready <= now) {
      std::pop_heap(future_.begin(), future_.end(), Later);
      due_.push_back(future_.back());
      future_.pop_back();
    }
  }
  // Those ready by the time last given (Add or Advance), in priority order; the engine
  // erases those it starts.
  std::vector<Waiting>& due() { return due_; }
  // The earliest ready time still to come; infinity when none.
  double NextReady() const {
    return future_.empty() ? std::numeric_limits<double>::infinity() : future_.front().ready;
  }

 private:
  static bool Later(const Waiting& a, const Waiting& b) { return b < a; }
  std::vector<Waiting> due_;     // in priority order
  std::vector<Waiting> future_;  // a heap: the first in priority order at the front
};

}  // namespace dapple::internal
