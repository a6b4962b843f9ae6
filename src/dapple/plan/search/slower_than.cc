// "Is this plan slower than t?": see slower_than.h.
//
// Note [Uncontended first]
// A question "is the plan slower than t?" is first put to a run without contention
// (BoundedRun::SlowerWithoutContention, Note [Runs without contention] in
// bounded_run.cc): no time of it is later than the contended run's, so when it proves
// the plan slower, so would the contended run, and it costs less (no waiting list, no
// queue of finishes). Where devices have links of their own it settles most questions (the
// neighbours a climb rejects are slower for their stages, not for contention). The answer
// is the contended run's otherwise, which may stop once it proves the plan slower (Note
// [Stopping above a time] in stop_bound.cc). Where links are shared by many devices the
// first run settles few questions and costs more than it saves: the planner's cache asks it
// first only while it pays (Note [Learning whether to run without contention first] in
// slower_than.h).
#include "dapple/plan/search/slower_than.h"

#include "dapple/plan/search/bounded_run.h"

namespace dapple {

bool UncontendedOdds::Worth() {
  std::lock_guard<std::mutex> lock(mu_);
  const unsigned asked = asked_++;
  return tries_ < 16 || 2 * settled_ >= tries_ || asked % 8 == 0;
}

void UncontendedOdds::Record(bool settled) {
  std::lock_guard<std::mutex> lock(mu_);
  ++tries_;
  settled_ += settled ? 1 : 0;
  if (tries_ >= 128) {  // the last ~64 to ~128 count
    tries_ /= 2;
    settled_ /= 2;
  }
}

SimResult SimulateSlowerThan(const Plan& plan, const ScheduleView& lowered, const CostModel& cost,
                             double t, bool uncontended_first, const ListsChecked* checked,
                             UncontendedOdds* odds) {
  BoundedRun run(plan, lowered, cost, checked);
  if (uncontended_first && (!odds || odds->Worth())) {
    std::optional<SimResult> slower = run.SlowerWithoutContention(t);
    if (odds) odds->Record(slower.has_value());
    if (slower) return *slower;
  }
  return run.Run(t);
}

SimResult SimulateSlowerThan(const Plan& plan, const CostModel& cost, double t,
                             bool uncontended_first) {
  const Schedule lowered = LoweredSchedule(plan);
  return SimulateSlowerThan(plan, ViewOf(lowered), cost, t, uncontended_first);
}

}  // namespace dapple
