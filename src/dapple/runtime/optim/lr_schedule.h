// The learning rate of every step of `dapple train`: a linear warm-up, then a constant rate,
// a cosine decay or a linear decay to a floor, as the recipes of nanoGPT, Megatron and
// torchtitan train GPTs. A pure function of the step, so that a resumed run continues the
// schedule from its step with no state of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dapple {

enum class LrScheduleKind { kConstant, kCosine, kLinear };

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  int64_t warmup_steps = 0;  // W
  double min_lr = 0;         // L: the floor of cosine and linear
};

// "constant", "cosine", "linear"; throws InputError listing them.
LrScheduleKind ParseLrScheduleKind(const std::string& s);
std::string ToString(LrScheduleKind k);

// The rate of step t (0-based) of a run of T = `steps` steps with peak rate lr:
//   t < W:    lr (t+1) / W
//   constant: lr
//   cosine:   L + (1 + cos(pi (t-W) / (T-W))) (lr - L) / 2
//   linear:   lr - (lr - L) (t-W) / (T-W)
// REQUIRES: LrScheduleError(s, lr, steps) is nullopt, 0 <= t < T.
double LearningRateAt(const LrSchedule& s, double lr, int64_t t, int64_t steps);

// One line naming the flag when the schedule cannot run `steps` steps from `lr` (a warm-up
// longer than the run, a negative warm-up, --min-lr below 0 or above --lr); else nullopt.
std::optional<std::string> LrScheduleError(const LrSchedule& s, double lr, int64_t steps);

}  // namespace dapple
