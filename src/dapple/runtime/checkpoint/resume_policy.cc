// --resume auto: see resume_policy.h.
#include "dapple/runtime/checkpoint/resume_policy.h"

#include <fmt/format.h>

#include <cstdio>
#include <optional>

#include "dapple/common/error.h"
#include "dapple/runtime/checkpoint/checkpoint.h"
#include "dapple/runtime/checkpoint/checkpoint_sums.h"

namespace dapple {

ResumeMode ParseResumeMode(const std::string& value) {
  if (value.empty()) return ResumeMode::kAlways;
  if (value == "auto") return ResumeMode::kAuto;
  ThrowInput(
      "--resume {}: expected no value (resume from the newest checkpoint) or 'auto' "
      "(resume when one exists, else start fresh)",
      value);
}

bool DecideToResume(ResumeMode mode, const std::filesystem::path& dir, Communicator& comm) {
  switch (mode) {
    case ResumeMode::kNever:
      return false;
    case ResumeMode::kAlways:
      return true;
    case ResumeMode::kAuto:
      break;
  }
  // Rank 0's view decides: it is the rank that commits `latest`.
  std::optional<std::filesystem::path> latest;
  if (comm.rank() == 0) latest = LatestCheckpoint(dir);
  torch::Tensor found = torch::tensor({latest ? 1.0 : 0.0}, torch::kFloat64);
  comm.AllReduceSum(found, "", fmt::format("rank {}: --resume auto", comm.rank()));
  const bool resume = found.item<double>() > 0;
  if (comm.rank() == 0) {
    if (resume) {
      std::fprintf(stderr, "--resume auto: resuming from %s\n", latest->c_str());
    } else {
      std::fprintf(stderr, "--resume auto: no checkpoint in %s, starting fresh\n", dir.c_str());
    }
    std::fflush(stderr);
  }
  return resume;
}

std::filesystem::path AgreeOnCheckpoint(const std::filesystem::path& dir, Communicator& comm) {
  constexpr double kNoLatest = -1, kNoneIntact = -2;
  double chosen = 0;  // the step; every rank but 0 adds 0
  if (comm.rank() == 0) {
    if (!LatestCheckpoint(dir)) {
      chosen = kNoLatest;
    } else if (auto intact = NewestIntactCheckpoint(dir)) {
      chosen = static_cast<double>(ReadCheckpointMeta(*intact).step);
    } else {
      chosen = kNoneIntact;
    }
  }
  torch::Tensor t = torch::tensor({chosen}, torch::kFloat64);
  comm.AllReduceSum(t, "", fmt::format("rank {}: choosing the checkpoint", comm.rank()));
  chosen = t.item<double>();
  if (chosen == kNoLatest)
    ThrowInput("{}: no checkpoint to resume from (no 'latest' file)", dir.string());
  if (chosen == kNoneIntact)
    ThrowInput("{}: no intact checkpoint to resume from (every committed one is damaged)",
               dir.string());
  return CheckpointStepDir(dir, static_cast<int64_t>(chosen));
}

}  // namespace dapple
