// SimulateSteadyState: see Note [Steady state] in simulator.h.
#include <algorithm>

#include "dapple/common/error.h"
#include "dapple/sim/global_norm.h"
#include "dapple/sim/prepared_run.h"
#include "dapple/sim/simulator.h"

namespace dapple {

SteadyState SimulateSteadyState(const Plan& plan, const CostModel& cost, int iterations,
                                const SimOptions& options) {
  using namespace internal;
  DAPPLE_CHECK(iterations >= 2, "a steady state needs two iterations");
  const Schedule lowered = LoweredSchedule(plan);
  CheckShape(plan, ViewOf(lowered), /*checked=*/false);
  PreparedRun p = Prepare(plan, ViewOf(lowered), cost, {}, nullptr);
  std::vector<int> all;
  for (const EngineDevice& ed : p.setup.devices)
    all.push_back(plan.stages[ed.stage].devices[ed.replica]);
  SteadyState out;
  double last_end = 0;
  for (int k = 0; k < iterations; ++k) {
    EngineResult run = RunOnce(p.setup, cost);
    if (options.global_norm_allreduce)
      AddGlobalNormAllReduce(p.setup, cost.ScalarAllReduceMs(all), run);
    double end = 0;
    p.setup.start_ms.clear();
    for (const EngineDeviceResult& d : run.devices) {
      end = std::max(end, d.end_ms);
      p.setup.start_ms.push_back(d.end_ms);
    }
    if (k == 0) out.cold_ms = end;
    out.iteration_ms = end - last_end;
    last_end = end;
  }
  out.iterations = iterations;
  return out;
}

}  // namespace dapple
