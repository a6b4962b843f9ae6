// A plan's run set up for the event engine, and its result mapped back: what Simulate does
// around the engine, shared with the runs of the planner's search (plan/search/
// bounded_run.h), which set up once and run many times. Internal to the simulator and the
// planner's search.
#pragma once

#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/format/plan.h"
#include "dapple/sim/event_engine.h"
#include "dapple/sim/simulator.h"

namespace dapple::internal {

struct PreparedRun {
  EngineSetup setup;
  SimResult result;                  // its stages' figures, filled as the setup is made
  std::vector<double> static_bytes;  // per group
  // Per device: the activations a re-computing backward rebuilds.
  std::vector<double> recompute_extra;
  std::vector<int> bucket_stages;  // the groups with bucketed allreduces (timeline tracks)
};

struct PrepareOptions {
  bool record_timeline = false;
  // Note [Twin replicas] (event_engine.cc): a stage whose replicas all cost the same runs
  // once. Not with a timeline nor with emulated devices.
  bool twins = false;
};

// The plan and the lists agree on S, v and M, and (unless `checked`) the lists are
// simulable (CheckSimulable). Throws Error otherwise.
void CheckShape(const Plan& plan, const ScheduleView& lowered, bool checked);

// The engine's setup for `plan` on `lowered`; with `checked` (which must outlive the setup)
// the stages carry the lists' facts.
PreparedRun Prepare(const Plan& plan, const ScheduleView& lowered, const CostModel& cost,
                    const PrepareOptions& options, const ListsChecked* checked);

// One run of the engine; with emulated devices, the run whose compute stretches settled.
EngineResult RunOnce(EngineSetup& setup, const CostModel& cost);

// The whole run's figures into `result`: iteration time, per-device busy, bubble and
// memory, speedup.
void FillDevices(const Plan& plan, const CostModel& cost, const PreparedRun& p,
                 const EngineResult& run, SimResult& result);

}  // namespace dapple::internal
