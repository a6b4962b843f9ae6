// AddGlobalNormAllReduce: see Note [The norm's allreduce in the simulator] in global_norm.h.
#include "dapple/sim/global_norm.h"

#include <algorithm>

namespace dapple::internal {

void AddGlobalNormAllReduce(const EngineSetup& setup, double norm_ms, EngineResult& run) {
  const int D = static_cast<int>(setup.devices.size());
  std::vector<double> step_ms(D);
  double arrival = 0;  // when the last device reaches its STEP
  for (int d = 0; d < D; ++d) {
    const EngineStage& st = setup.stages[setup.devices[d].stage];
    step_ms[d] = setup.devices[d].step_ms;
    if (!run.compute_intervals.empty()) {  // shared compute: the STEP's stretched interval
      const auto [a, b] = run.compute_intervals[d][st.length - 1];
      step_ms[d] = b - a;
    }
    arrival = std::max(arrival, run.devices[d].end_ms - step_ms[d]);
  }
  const double steps_start = arrival + norm_ms;
  for (auto& e : run.events) {
    if (e.device < D && e.category == "step") {
      e.start_ms = steps_start;
      e.end_ms = steps_start + step_ms[e.device];
    }
  }
  for (int d = 0; d < D; ++d) {
    run.devices[d].end_ms = steps_start + step_ms[d];
    if (setup.record_timeline)
      run.events.push_back(
          {d, "NORM", "allreduce", arrival, steps_start, setup.devices[d].stage, -1});
  }
}

}  // namespace dapple::internal
