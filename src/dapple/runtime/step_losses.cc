#include "dapple/runtime/step_losses.h"

#include <fmt/format.h>

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

}  // namespace dapple
