// The lower bound behind BoundedRun::Run (Note [Stopping above a time] in stop_bound.cc):
// a RunWatcher (Note [Watching a run] in sim/event_engine.h) that the event engine asks while
// it runs. Internal to the planner's search.
#pragma once

#include <vector>

#include "dapple/sim/engine_state.h"
#include "dapple/sim/event_engine.h"
#include "dapple/sim/list_facts.h"

namespace dapple::internal {

class StopBound final : public RunWatcher {
 public:
  // Reads the setup's lists and costs; the setup must outlive the calls below. The watched
  // pc of a group is its list's last B (or I).
  void Prepare(const EngineSetup& setup, std::vector<int>& watched_pc) override;
  // A lower bound of the time the last device ends, given every device's progress.
  // O(devices).
  double Bound(const std::vector<DeviceState>& devices) const override;

 private:
  const EngineSetup* setup_ = nullptr;
  // Per stage: pc of the last B or I (-1: none); whether its last backward waits for the
  // gradient that the next stage's last backward sends (one chunk, same micro-batch).
  std::vector<int> last_backward_pc_;
  std::vector<char> chained_;
  // Per device: listed costs of its whole list, of what follows its last backward, and of
  // that backward.
  std::vector<double> work_, tail_, last_cost_;
  // Per stage: the pc of the AR whose buckets' exposure counts (-1: none); per device, that
  // exposure (Note [The buckets' exposure] in stop_bound.cc), in work_ and tail_ too.
  std::vector<int> exposed_ar_pc_;
  std::vector<double> exposure_;
  std::vector<ListFacts> facts_;  // per stage, of the lists that came without theirs
};

}  // namespace dapple::internal
