// Checksums of checkpoint files, the fallback to an intact checkpoint, and pruning old ones.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dapple/runtime/checkpoint/checkpoint.h"

namespace dapple {

// Note [Checkpoint checksums]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A layer file can be damaged after its checkpoint was committed (a disk error, a copy cut
// short, a user's edit). Each writer (the background writer thread of Note [Asynchronous
// checkpoints], or the training thread with --sync-checkpoints) reads back the file it wrote
// and reports its size and CRC-32 with its confirmation (Note [Checkpoint commit]), so the
// sums are of the bytes on the disk, not of the copy in memory; rank 0 keeps them in meta.json's
// "files". A resume then checks before it loads: rank 0 takes the newest committed checkpoint
// whose files (those it can see) match their sums, and for each newer one that does not it
// prints one line naming the damaged file and falls back; all ranks load the step rank 0
// chose, and each checks its own layers' files again before loading (on several nodes rank 0
// may not see them). Checkpoints written before sums existed load unchecked. The read-back
// costs one read of each file from the page cache per save.

// The size and CRC-32 of a file as it is on disk; throws InputError naming it when unreadable.
LayerFileSum SumOfFile(const std::filesystem::path& file);

// Checks the files of `layers` in a committed step folder against its meta.json sums.
// Returns "" when they match (or the checkpoint predates sums), else one line naming the
// first file that is missing, truncated or corrupted. `only_existing`: skip files that do not
// exist here (rank 0's view of a checkpoint written on several nodes).
std::string CheckLayerFiles(const std::filesystem::path& step_dir, const CheckpointMeta& meta,
                            const std::vector<std::string>& layers, bool only_existing = false);

// The committed step folders of `dir` (those with a meta.json), oldest first.
std::vector<std::filesystem::path> CommittedCheckpoints(const std::filesystem::path& dir);

// The newest committed checkpoint at or before `latest` whose files match their sums (rank 0's
// view), printing one line on stderr for each newer one skipped; nullopt when there is none.
std::optional<std::filesystem::path> NewestIntactCheckpoint(const std::filesystem::path& dir);

// Deletes the oldest committed step folders of `dir` so that `keep` remain (keep <= 0: none
// deleted), never the one `latest` names.
void PruneCheckpoints(const std::filesystem::path& dir, int keep);

}  // namespace dapple
