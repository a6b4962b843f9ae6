// Note [Fault injection]
// The tests of restarts, checkpoints and error reports kill a rank at a chosen point of a
// chosen step. One object says where, read once from the environment by each rank, and every
// place that may die asks it; a default-made one (every real run) injects nothing.
//   DAPPLE_TEST_DIE_AT=rank:step[:attempts]  that rank dies halfway through the step's
//       instruction list (step = the run's step count: after the last step), on the first
//       `attempts` starts of a restarted job (Note [Restarts]; default 1).
//   DAPPLE_TEST_DIE_IN_SAVE=rank:steps  that rank dies while saving the checkpoint after
//       `steps` steps, after its first layer file and before confirming it.
//   DAPPLE_TEST_CHAOS=rank:step[:save],...  entry k applies to start k of a restarted job:
//       that rank dies mid-step `step`, or with ":save" while saving after `step` steps.
// Test-only and undocumented for users; a malformed value is an InputError naming it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dapple {

class FaultInjector {
 public:
  FaultInjector() = default;  // injects nothing

  // The faults the environment asks of `rank` on restart attempt `attempt` (0: first start).
  static FaultInjector FromEnvironment(int rank, int attempt);

  // Kills this process when the test asked for step `step` and `index` is the middle of its
  // `count` instructions; `where` and `what` name the rank and the instruction in the line
  // it prints first.
  void MidStep(int64_t step, size_t index, size_t count, const std::string& where,
               const std::string& what) const;
  // Kills this process when the test asked for the point after `steps`, the run's last step.
  void AfterTraining(int64_t steps) const;
  // Whether the save of the checkpoint after `steps_done` steps kills this process.
  bool DiesInSave(int64_t steps_done) const { return die_in_save_steps_ == steps_done; }

 private:
  int64_t die_at_step_ = -1;
  int64_t die_in_save_steps_ = -1;
};

}  // namespace dapple
