// Internal to dapple_schedule: the V-shape generators (Note [ZB-V], Note [V-Half and V-Min]).
#pragma once

#include <memory>
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
// MakeControlledV's lists, made once per (kind, S, M) while they fit a process-wide memo
// (Note [V lists made once]).
std::shared_ptr<const std::vector<std::vector<Instruction>>> ControlledVLists(
    ScheduleKind kind, int num_stages, int num_micro_batches);
// A pass of v-half's or v-min's building block (Note [V-Half and V-Min]): its unit, stage,
// pass (0..3: F0, F1, I1, I0) and micro-batch.
struct BlockPass {
  int time, stage, pass, micro_batch;
};
// The block's passes of (kind, S, M) by time, stages in order on ties: the order in which the
// squeeze moves them (Note [Squeeze order]).
std::vector<BlockPass> BlockPasses(ScheduleKind kind, int num_stages, int num_micro_batches);
// Chunk-micro-batches stage `stage` holds at its peak under a V-shape kind (from F to W),
// counted on its list.
int VShapePeakInFlight(ScheduleKind kind, int stage, int num_stages, int num_micro_batches);
// Forwards (of either chunk) that open stage `stage`'s list under a V-shape kind.
int VShapeWarmup(ScheduleKind kind, int stage, int num_stages, int num_micro_batches);

}  // namespace dapple::internal
