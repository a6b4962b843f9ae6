// StepLosses: see step_losses.h (Note [Loss off the critical path]).
#include "dapple/runtime/train/step_losses.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "dapple/common/error.h"

namespace dapple {

StepLosses::StepLosses(Communicator& comm, std::string group, bool participates, int rank,
                       std::chrono::milliseconds timeout)
    : comm_(comm),
      group_(std::move(group)),
      participates_(participates),
      rank_(rank),
      timeout_(timeout) {}

void StepLosses::Start(int64_t step, double loss_part, double grad_norm_part, double t0, double t1,
                       std::vector<TimelineEvent> events) {
  DAPPLE_CHECK(!pending_);
  pending_ = FinishedStep{step, loss_part, grad_norm_part, t0, t1, 0, std::move(events)};
  sum_ = torch::tensor({loss_part, grad_norm_part}, torch::kFloat64);
  if (participates_) {
    work_ = comm_.AllReduceSumAsync(sum_, group_,
                                    fmt::format("rank {}, step {}: loss allreduce", rank_, step));
  }
}

std::optional<FinishedStep> StepLosses::Finish(double until) {
  if (!pending_) return std::nullopt;
  if (work_.valid()) {
    work_.Wait(timeout_);
    work_ = CommWork();
  }
  FinishedStep done = std::move(*pending_);
  pending_.reset();
  done.loss = sum_[0].item<double>();
  done.grad_norm = sum_[1].item<double>();
  done.step_ms = until - done.t0;
  return done;
}

// Note [Non-finite losses]: a NaN or infinite loss (a NaN in the data, a learning rate that
// diverges, BatchNorm over too few samples) poisons every parameter it reaches, and would be
// written into the next checkpoint. Every training rank learns each step's loss from the
// same sum, in step order, so all of them stop at the first such step, before the step's
// checkpoint is written (the sum is always waited for first), and the newest checkpoint on
// disk stays the last good one. Rank 0 says why.
void CheckLossFinite(const FinishedStep& done, int64_t global_batch, bool shuffled, bool report) {
  if (std::isfinite(done.loss)) return;
  const int64_t first = done.step * global_batch;
  std::string what = fmt::format(
      "step {}: the loss is {}; training stopped before any checkpoint of this step (global "
      "batch {}: samples {}..{} of the data's {} order{})",
      done.step + 1, done.loss, done.step, first, first + global_batch - 1,
      shuffled ? "shuffled" : "file", shuffled ? "" : ", wrapping");
  if (report) throw InputError(what);
  throw ReportedElsewhere(what);
}

}  // namespace dapple
