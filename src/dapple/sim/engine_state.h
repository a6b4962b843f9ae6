// The event engine's working state (engine.h). Internal to dapple_sim.
#pragma once

#include <vector>

#include "dapple/sim/event_engine.h"
#include "dapple/sim/waiting_transfers.h"

namespace dapple::internal {

// clock, done and last_backward_end (DeviceProgress) are what a RunWatcher reads.
struct DeviceState : DeviceProgress {
  double busy = 0;
  double bytes = 0, peak_bytes = 0;
  int in_flight = 0, peak_in_flight = 0;
  int pc = 0;
  int blocked_on = -1;      // transfer id this device waits for, -1 when none
  double compute_end = -1;  // when its last forward or backward ended; -1: none yet
};

struct Transfer {
  double ready = 0;    // when the last sender executed its send
  double start = -1;   // when it got its resources
  double finish = -1;  // < 0 until finished
  int arrived = 0;     // senders that executed their send
  int route = 0;       // set once ready (id / M: the sender passes it)
};

// A transfer that finishes (frees its links) at `time`.
struct Event {
  double time;
  int transfer;
  bool operator>(const Event& o) const {
    return time != o.time ? time > o.time : transfer > o.transfer;
  }
};

// The finishes to come, earliest (then lowest transfer id) first. Transfers hold links, so
// few run at once (usually 0 or 1): a vector sorted latest
// first, where a binary heap cost more per push and pop than the few moves.
class FinishQueue {
 public:
  void clear() { q_.clear(); }
  bool empty() const { return q_.empty(); }
  const Event& front() const { return q_.back(); }
  void pop() { q_.pop_back(); }
  void push(const Event& e) {
    size_t i = q_.size();
    q_.push_back(e);
    for (; i > 0 && e > q_[i - 1]; --i) q_[i] = q_[i - 1];
    q_[i] = e;
  }

 private:
  std::vector<Event> q_;  // latest first
};

// The engine's working memory, kept per thread between runs: the planner simulates many
// plans in a row, and fresh multi-megabyte vectors cost more in page faults than the run.
struct Scratch {
  std::vector<DeviceState> dev;
  std::vector<Transfer> xfer;
  // Per device and chunk: start and op_scale of its last B or W (bucket readiness).
  std::vector<double> last_backward_start, last_backward_scale;
  std::vector<int> ar_arrived;
  std::vector<double> ar_ready;
  std::vector<char> resource_busy;
  std::vector<int> runnable;
  std::vector<int> receiver_stage;  // per route
  std::vector<int> watched_pc;      // per group (Note [Watching a run] in event_engine.h)
  // Transfers that hold resources, ready (now or later) and not started.
  WaitingTransfers waiting;
  FinishQueue queue;
};

// Throws dapple::Error naming the devices (stage, replica, pc, instruction; the first
// eight) that did not reach the end of their lists: the lists deadlock.
void ThrowIfUnfinished(const EngineSetup& setup, const std::vector<DeviceState>& dev);

}  // namespace dapple::internal
