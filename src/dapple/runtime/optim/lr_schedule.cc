// LearningRateAt and its checks: see lr_schedule.h.
#include "dapple/runtime/optim/lr_schedule.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "dapple/common/error.h"

namespace dapple {

LrScheduleKind ParseLrScheduleKind(const std::string& s) {
  if (s == "constant") return LrScheduleKind::kConstant;
  if (s == "cosine") return LrScheduleKind::kCosine;
  if (s == "linear") return LrScheduleKind::kLinear;
  ThrowInput("--lr-schedule {}: unknown schedule (known: constant, cosine, linear)", s);
}

std::string ToString(LrScheduleKind k) {
  switch (k) {
    case LrScheduleKind::kConstant:
      return "constant";
    case LrScheduleKind::kCosine:
      return "cosine";
    case LrScheduleKind::kLinear:
      return "linear";
  }
  return "?";
}

double LearningRateAt(const LrSchedule& s, double lr, int64_t t, int64_t steps) {
  const int64_t W = s.warmup_steps;
  if (t < W) return lr * static_cast<double>(t + 1) / static_cast<double>(W);
  // t >= W implies T > W (t < T).
  const double done = static_cast<double>(t - W) / static_cast<double>(steps - W);
  switch (s.kind) {
    case LrScheduleKind::kConstant:
      return lr;
    case LrScheduleKind::kCosine:
      return s.min_lr + 0.5 * (1 + std::cos(std::numbers::pi * done)) * (lr - s.min_lr);
    case LrScheduleKind::kLinear:
      return lr - (lr - s.min_lr) * done;
  }
  return lr;
}

std::optional<std::string> LrScheduleError(const LrSchedule& s, double lr, int64_t steps) {
  if (s.warmup_steps < 0)
    return fmt::format("--warmup-steps {}: must be 0 or more", s.warmup_steps);
  if (s.warmup_steps > steps) {
    return fmt::format("--warmup-steps {}: longer than the run (--steps {})", s.warmup_steps,
                       steps);
  }
  if (!(s.min_lr >= 0)) return fmt::format("--min-lr {}: must be 0 or more", s.min_lr);
  if (s.min_lr > lr) return fmt::format("--min-lr {}: above --lr {}", s.min_lr, lr);
  if (s.kind == LrScheduleKind::kConstant && s.min_lr > 0)
    return fmt::format("--min-lr {}: only with --lr-schedule cosine or linear", s.min_lr);
  return std::nullopt;
}

}  // namespace dapple
