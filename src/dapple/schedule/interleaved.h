// Internal to dapple_schedule: the interleaved 1F1B generator (Note [Interleaved 1F1B]).
#pragma once

#include <vector>

#include "dapple/schedule/instruction.h"

namespace dapple::internal {

// Appends stage `stage`'s compute-only list of interleaved 1F1B with `chunks` chunks.
// REQUIRES: CheckChunks passed (chunks == 1, or M a multiple of S with S > 1).
void AppendInterleaved(int stage, int num_stages, int num_micro_batches, int chunks,
                       std::vector<Instruction>& p);
// Forwards stage `stage` runs before its first backward: min((v-1)S + 2(S-s) - 1, vM).
int InterleavedWarmup(int stage, int num_stages, int num_micro_batches, int chunks);

}  // namespace dapple::internal
