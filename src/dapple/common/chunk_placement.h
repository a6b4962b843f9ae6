// Where the chunks of a plan with virtual stages run (Note [Chunks] in schedule/schedule.h).
// Lives in common because the plan format, the schedules and the simulator all map between
// virtual stages (chunks in model order) and device groups.
#pragma once

namespace dapple {

// Note [V placement]
// Looped placement (interleaved 1F1B): chunk c of group g is virtual stage c * S + g, so the
// model runs down the groups v times and the last group sends to the first. V placement
// (the V-shape schedules, two chunks per group): chunk 0 of group g is virtual stage g and
// chunk 1 is 2S - 1 - g, so the model runs down the groups and back up, the last group
// hands its chunk 0's output to its own chunk 1, and the last chunk ends on the first
// group. In both, virtual stage k is chunk k / S of its group.
inline int VirtualStageOf(int group, int chunk, int num_groups, bool v_shape) {
  return v_shape && chunk == 1 ? 2 * num_groups - 1 - group : chunk * num_groups + group;
}
inline int GroupOfVirtualStage(int virtual_stage, int num_groups, bool v_shape) {
  return v_shape && virtual_stage >= num_groups ? 2 * num_groups - 1 - virtual_stage
                                                : virtual_stage % num_groups;
}

}  // namespace dapple
