// Internal to dapple_schedule: the V-shape generators (Note [ZB-V], Note [V-Half and V-Min]).
#pragma once

#include <vector>

#include "dapple/common/schedule_kind.h"
#include "dapple/schedule/instruction.h"

namespace dapple::internal {

// Appends stage `stage`'s compute-only list of ZB-V: chunk 0 is virtual stage `stage`,
// chunk 1 virtual stage 2S - 1 - stage (Note [V placement]).
void AppendZbV(int stage, int num_stages, int num_micro_batches, std::vector<Instruction>& p);
// The compute-only lists of all stages of v-half or v-min (the squeeze couples the stages).
std::vector<std::vector<Instruction>> MakeControlledV(ScheduleKind kind, int num_stages,
                                                      int num_micro_batches);
// Chunk-micro-batches stage `stage` holds at its peak under a V-shape kind (from F to W),
// counted on its list.
int VShapePeakInFlight(ScheduleKind kind, int stage, int num_stages, int num_micro_batches);
// Forwards (of either chunk) that open stage `stage`'s list under a V-shape kind.
int VShapeWarmup(ScheduleKind kind, int stage, int num_stages, int num_micro_batches);

}  // namespace dapple::internal
