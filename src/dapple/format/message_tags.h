// The message tags of the runtime's point-to-point transfers, and their limit. Torch-free
// so that the planner can refuse plans the runtime could not run (docs/runtime.md, "Plans
// the transport cannot carry").
//
// A tag is unique per (boundary, direction, micro-batch, sender rank, receiver rank) within
// a step: ((boundary x 2 + direction) x M + micro_batch) x W^2 + sender x W + receiver,
// for M micro-batches and a job of W processes. c10d takes the tag as an int, so every tag
// of a plan must be below 2^31: 2 x (S - 1) x M x W^2 <= 2^31 for S stages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dapple/format/plan.h"

namespace dapple {

inline constexpr int64_t kMessageTagLimit = int64_t{1} << 31;  // tags are 0..limit-1

// The tag of one transfer. REQUIRES: the arguments are within the plan's ranges.
int64_t MessageTag(int boundary, int direction, int micro_batch, int sender_rank, int receiver_rank,
                   int num_micro_batches, int world_size);

// How many tags a plan of `num_stages` stages and `num_micro_batches` micro-batches uses in
// a job of `world_size` processes: one more than its largest tag (0 for a single stage);
// INT64_MAX when that does not fit in int64.
int64_t MessageTagCount(int num_stages, int num_micro_batches, int world_size);

// Why `plan` cannot run on `world_size` processes because of its tags, as one line naming
// the fields to change; nullopt when it can.
std::optional<std::string> MessageTagError(const Plan& plan, int world_size);

}  // namespace dapple
