// Helpers for the simulator tests: plans built from stage layer ranges and device lists, and
// lookups in a simulated timeline.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dapple/format/plan.h"
#include "dapple/sim/timeline.h"

namespace dapple::testing {

struct StageSpec {
  int first_layer, last_layer;
  std::vector<int> devices;
};

inline Plan MakePlan(const std::vector<StageSpec>& stages, int micro_batch_size,
                     int num_micro_batches, ScheduleKind kind) {
  Plan p;
  p.planner = "test";
  p.micro_batch_size = micro_batch_size;
  p.num_micro_batches = num_micro_batches;
  p.global_batch_size = micro_batch_size * num_micro_batches;
  p.schedule = kind;
  for (const StageSpec& s : stages) {
    StagePlan sp;
    sp.first_layer = s.first_layer;
    sp.last_layer = s.last_layer;
    sp.devices = s.devices;
    p.stages.push_back(sp);
  }
  return p;
}

// The first event named `name` on `track`, or nullptr.
inline const TimelineEvent* FindEvent(const Timeline& t, int track, const std::string& name) {
  for (const TimelineEvent& e : t.events)
    if (e.device == track && e.name == name) return &e;
  return nullptr;
}

// S balanced stages of one layer each, stage s on device s.
inline Plan StraightPlan(int S, int M, ScheduleKind kind) {
  std::vector<StageSpec> stages;
  for (int s = 0; s < S; ++s) stages.push_back({s, s, {s}});
  return MakePlan(stages, 1, M, kind);
}

}  // namespace dapple::testing
