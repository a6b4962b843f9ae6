// `--resume` and `--resume auto`: whether a run continues from a checkpoint. With `auto` a
// job restarted by something that knows nothing of checkpoints (a Slurm requeue, a shell
// retry loop, mpirun) resumes when a complete checkpoint exists and starts fresh when
// none does, with no special case for the first start (docs/runtime.md, "Under other
// launchers").
#pragma once

#include <filesystem>
#include <string>

#include "dapple/runtime/comm/communicator.h"

namespace dapple {

enum class ResumeMode { kNever, kAlways, kAuto };

// "" (a bare --resume) is kAlways, "auto" kAuto; anything else throws InputError naming
// --resume.
ResumeMode ParseResumeMode(const std::string& value);

// Whether this rank resumes. kAlways: yes (a missing checkpoint is then an error of the
// resume itself); kNever: no. kAuto: yes when rank 0 sees a complete checkpoint in `dir`
// (its `latest`), decided by rank 0 and shared with every rank so that they all agree;
// rank 0 says on stderr which it chose. Collective over `comm` for kAuto.
bool DecideToResume(ResumeMode mode, const std::filesystem::path& dir, Communicator& comm);

// The checkpoint every rank resumes from: the newest committed one whose files match their
// checksums as rank 0 sees them (NewestIntactCheckpoint, checkpoint_sums.h), chosen by rank 0
// and shared with all ranks. Throws InputError naming `dir` when it holds no committed
// checkpoint or none is intact. Collective over `comm`.
std::filesystem::path AgreeOnCheckpoint(const std::filesystem::path& dir, Communicator& comm);

}  // namespace dapple
