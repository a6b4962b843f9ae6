// Plans with chunks for the planners (docs/planner.md, "Interleaved 1F1B" and "V-shape
// schedules"): a plan's device groups with the model cut into v chunks per group, chunk k on
// group k mod S (interleaved), or two chunks per group in a V (Note [V placement]).
#pragma once

#include <optional>
#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/format/plan.h"
#include "dapple/plan/search/rescoring.h"

namespace dapple {

// `base` (S >= 2 stages of one chunk, no re-computation) with the same devices and
// num_micro_batches M, schedule interleaved and v chunks per group: the model cut into
// v rounds of equal compute, each round cut among the groups in the shares of compute
// that base's stages have (so a wider group keeps its larger share). nullopt when the
// layers cannot give every chunk one, or M is not a positive multiple of S.
std::optional<Plan> InterleavePlan(const Plan& base, int v, const CostModel& cost);

// Interleaved proposals from `base`'s groups: v = 2, 4, 8, ... (while there are layers),
// at every micro-batch size in `sizes` whose M = global_batch / m is a multiple of S and
// leaves every replica a sample.
std::vector<Proposal> InterleavedProposals(const Plan& base, const CostModel& cost,
                                           const std::vector<int>& sizes, int global_batch);

// `base` (one chunk per stage) with the same devices, micro-batches and a V-shaped schedule
// `kind`: 2S chunks, the first S down the groups and the last S back up (Note [V
// placement]), each half of the model cut among the groups in base's shares of compute
// (`by_width`: in shares of their replicas). Re-computation is dropped. nullopt when the
// layers cannot give every chunk one.
std::optional<Plan> VShapePlan(const Plan& base, ScheduleKind kind, const CostModel& cost,
                               bool by_width = false);

// VShapePlan of `base`'s groups for each of `kinds`, by base's shares and by width, at every
// micro-batch size in `sizes` that leaves every replica a sample (origin: the kind's name).
std::vector<Proposal> VShapeProposals(const Plan& base, const CostModel& cost,
                                      const std::vector<int>& sizes, int global_batch,
                                      const std::vector<ScheduleKind>& kinds);

}  // namespace dapple
