// A memo of simulator results by plan, shared by the planner's searches: the refinement
// lists the same neighbours again from nearby plans, and the schedule families' searches
// (Note [Never slower with more schedules] in family_search.cc) score many of the same plans.
#pragma once

#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "dapple/cost/cost_model.h"
#include "dapple/format/plan.h"
#include "dapple/plan/search/lowered_lists.h"
#include "dapple/plan/search/slower_than.h"
#include "dapple/sim/simulator.h"

namespace dapple {

// Everything of `plan` that the simulator reads (stages, devices, re-computation, m, M, the
// global batch, schedule, chunks, overlap), as a string; equal keys simulate equally on one cost
// model. Interleaved with one chunk has dapple-b's key: its lists are dapple-b's.
std::string SimKey(const Plan& plan);

// Thread-safe. One cache per cost model: results are only valid for the model they were
// computed with.
class SimCache {
 public:
  // SimulatePlan(plan, cost, {.record_timeline = false}), or the stored result of a plan
  // with the same SimKey. Two threads asking for one new plan may both simulate it (the
  // results are equal); the first stored is kept. The lowered lists are memoized too: a
  // stage's depends only on the schedule, S, M, v and whether it is replicated.
  // With stop_above_ms (SimulateSlowerThan's t): the run may stop once it proves the plan
  // slower; a stopped result is kept too and serves a later call whose stop_above_ms it
  // exceeds. uncontended_first: SimulateSlowerThan's, with the cache's odds (the result is the
  // same either way).
  SimResult Simulate(const Plan& plan, const CostModel& cost,
                     double stop_above_ms = std::numeric_limits<double>::infinity(),
                     bool uncontended_first = true);
  long long hits() const;
  long long misses() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, SimResult> results_;
  // Per (schedule, S, M, v): the lowered lists with no stage replicated, and with every
  // stage (AR before STEP), made when a plan first needs them, with each list's facts.
  using Lowered = LoweredLists;
  std::map<std::vector<int>, std::shared_ptr<const Lowered>> single_, replicated_;
  long long hits_ = 0, misses_ = 0;
  UncontendedOdds odds_;  // Note [Learning whether to run without contention first]
};

}  // namespace dapple
