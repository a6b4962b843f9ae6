// --resume auto: see resume_policy.h.
#include "dapple/runtime/resume_policy.h"

#include <fmt/format.h>

#include <cstdio>
#include <optional>

#include "dapple/common/error.h"
#include "dapple/runtime/checkpoint.h"

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

}  // namespace dapple
