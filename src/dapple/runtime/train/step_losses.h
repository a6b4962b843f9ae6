// The per-step loss sum of `dapple train`, taken off the critical path.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dapple/runtime/comm/communicator.h"
#include "dapple/sim/timeline.h"

namespace dapple {

// Note [Loss off the critical path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Only rank 0 needs a step's loss (to print it and to keep it in checkpoints), but summing
// it is a collective over every training rank. Waited for at once, it made each step a
// barrier of the whole job: on this machine one small allreduce costs about 0.9 ms
// (calibrated `allreduce_latency_s`), half of the quickstart's 1.7 ms simulated step, and
// the simulator, which models the schedule, never saw it. The sum of step k is therefore
// started when step k's schedule ends and waited for when step k+1's schedule has run (the
// pipeline's own transfers keep the ranks within a step of each other), or at once before
// a checkpoint, the trace and the end, which need every loss so far. The losses are the
// same numbers in the same order; only where the wait happens moves. Collectives on the
// loss group keep one order on every member: at most one sum is in flight. The step's
// global gradient norm (Note [Global gradient clipping]), which every training rank knows,
// rides in the same sum: one rank adds it, the others add 0, so rank 0 gets it exactly.
struct FinishedStep {
  int64_t step = 0;
  double loss = 0;
  double grad_norm = 0;   // with --clip-grad-norm
  double t0 = 0, t1 = 0;  // the step's schedule ran from t0 to t1 (ms, steady clock)
  double step_ms = 0;     // wall time of the step: from t0 to the next step's t0
  std::vector<TimelineEvent> events;
};

// Throws when `done`'s loss is not finite (Note [Non-finite losses] in step_losses.cc):
// InputError naming the step and its samples when `report`, else ReportedElsewhere.
void CheckLossFinite(const FinishedStep& done, int64_t global_batch, bool shuffled, bool report);

class StepLosses {
 public:
  // `group`: the loss group ("" = the world); `participates`: whether this rank is one of
  // its members (idle ranks are not).
  StepLosses(Communicator& comm, std::string group, bool participates, int rank,
             std::chrono::milliseconds timeout);
  // Starts summing step `step`'s loss part and gradient-norm part (0 on all ranks but
  // one). REQUIRES: no step pending (Finish first).
  void Start(int64_t step, double loss_part, double grad_norm_part, double t0, double t1,
             std::vector<TimelineEvent> events);
  // Waits for the pending step's sum; its wall time ends at `until` (ms). nullopt when no
  // step is pending.
  std::optional<FinishedStep> Finish(double until);

 private:
  Communicator& comm_;
  std::string group_;
  bool participates_;
  int rank_;
  std::chrono::milliseconds timeout_;
  std::optional<FinishedStep> pending_;
  torch::Tensor sum_;
  CommWork work_;
};

}  // namespace dapple
