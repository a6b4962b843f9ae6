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
// from those still to come, which wait sorted by priority behind a moving head; when time
// reaches their ready time they move, in priority order, to the end of the due ones (every
// due one is ready earlier). The engine sees the same transfers in the same order as with
// one list. (Those to come are few, and a new one usually goes near the back: a sorted vector
// whose head moves costs fewer instructions than a binary heap, whose pops take a
// comparison function call per level.)
class WaitingTransfers {
 public:
  void Clear() {
    due_.clear();
    future_.clear();
    head_ = 0;
  }
  void Add(const Waiting& w, double now) {
    std::vector<Waiting>& list = w.ready <= now ? due_ : future_;
    const size_t from = w.ready <= now ? 0 : head_;
    // Most go last (ready later than those waiting): no search, no move.
    if (list.size() == from || !(w < list.back())) {
      list.push_back(w);
      return;
    }
    const auto first = list.begin() + static_cast<std::ptrdiff_t>(from);
    list.insert(std::upper_bound(first, list.end(), w), w);
  }
  // Moves the transfers ready by `now` to the due ones (time moved on to `now`).
  void Advance(double now) {
    while (head_ < future_.size() && future_[head_].ready <= now) due_.push_back(future_[head_++]);
    if (head_ == future_.size()) {
      future_.clear();
      head_ = 0;
    } else if (head_ >= 64 && 2 * head_ >= future_.size()) {  // O(1) a move on average
      future_.erase(future_.begin(), future_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }
  // Those ready by the time last given (Add or Advance), in priority order; the engine
  // erases those it starts.
  std::vector<Waiting>& due() { return due_; }
  // The earliest ready time still to come; infinity when none.
  double NextReady() const {
    return head_ < future_.size() ? future_[head_].ready : std::numeric_limits<double>::infinity();
  }

 private:
  std::vector<Waiting> due_;  // in priority order
  // From head_ on, in priority order; those before head_ moved to due_ already.
  std::vector<Waiting> future_;
  size_t head_ = 0;
};

}  // namespace dapple::internal
