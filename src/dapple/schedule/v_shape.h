// Internal to dapple_schedule: the V-shape generators (Note [ZB-V]).
#pragma once

#include <vector>

#include "dapple/schedule/instruction.h"

namespace dapple::internal {

// Appends stage `stage`'s compute-only list of ZB-V: chunk 0 is virtual stage `stage`,
// chunk 1 virtual stage 2S - 1 - stage (Note [V placement]).
void AppendZbV(int stage, int num_stages, int num_micro_batches, std::vector<Instruction>& p);
// Chunk-micro-batches stage `stage` holds at its peak under ZB-V (from F to W).
int ZbVPeakInFlight(int stage, int num_stages, int num_micro_batches);

}  // namespace dapple::internal
