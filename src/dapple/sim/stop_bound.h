// The lower bound behind BoundedRun::Run (Note [Stopping above a time] in
// stop_bound.cc). Internal to dapple_sim: the event engine asks it while it runs.
#pragma once

#include <algorithm>
#include <vector>

#include "dapple/sim/event_engine.h"
#include "dapple/sim/list_facts.h"

namespace dapple::internal {

// Where a device stands in its list, as the bound reads it.
struct DeviceProgress {
  double clock = 0;  // its clock (when blocked: when it reached the blocking instruction)
  double done = 0;   // listed costs of the instructions it ran
  double last_backward_end = -1;  // when its last B (or I) ended; -1: not run yet
};

class StopBound {
 public:
  // Reads the setup's lists and costs; the setup must outlive the calls below.
  void Prepare(const EngineSetup& setup);
  // Whether device d's instruction at pc is its list's last B (or I): the engine records
  // when it ends in DeviceProgress::last_backward_end.
  bool IsLastBackward(int device, int pc) const {
    return pc == last_backward_pc_[setup_->devices[device].stage];
  }
  // A lower bound of the time the last device ends, given every device's progress
  // (at(d): device d's DeviceProgress). O(devices).
  template <typename At>
  double Bound(At at) const;

 private:
  const EngineSetup* setup_ = nullptr;
  // Per stage: pc of the last B or I (-1: none); whether its last backward waits for the
  // gradient that the next stage's last backward sends (one chunk, same micro-batch).
  std::vector<int> last_backward_pc_;
  std::vector<char> chained_;
  // Per device: listed costs of its whole list, of what follows its last backward, and of
  // that backward.
  std::vector<double> work_, tail_, last_cost_;
  std::vector<ListFacts> facts_;  // per stage, of the lists that came without theirs
};

template <typename At>
double StopBound::Bound(At at) const {
  const EngineSetup& s = *setup_;
  const int S = s.num_stages, V = S * s.num_chunks;
  double bound = 0;
  double arrival = -1;  // lower bound of when stage g's last gradient arrives; -1: none known
  for (int g = S - 1; g >= 0; --g) {
    const EngineStage& st = s.stages[g];
    double stage_end = 0;  // of the stage's last backward, on its slowest replica
    // Twins (Note [Twin replicas] in event_engine.cc): the first replica stands for all.
    for (int d = st.first_device; d < st.first_device + RunReplicas(st); ++d) {
      const DeviceProgress& p = at(d);
      const double left = work_[d] - p.done;
      bound = std::max(bound, p.clock + left);
      if (last_backward_pc_[g] < 0) continue;
      double end = p.last_backward_end >= 0 ? p.last_backward_end : p.clock + (left - tail_[d]);
      if (chained_[g] && arrival >= 0) end = std::max(end, arrival + last_cost_[d]);
      bound = std::max(bound, end + tail_[d]);
      stage_end = std::max(stage_end, end);
    }
    // The gradient to stage g - 1 leaves after the last backward of every replica of g.
    arrival = g > 0 && last_backward_pc_[g] >= 0 ? stage_end + s.routes[V - 1 + g - 1].ms : -1;
  }
  return bound;
}

}  // namespace dapple::internal
