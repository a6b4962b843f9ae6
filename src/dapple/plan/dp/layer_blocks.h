// Coarsening of a long layer list into at most K blocks, for the planners' search: stages
// may only end at a block end. Models with at most K layers keep every layer boundary.
#pragma once

#include <vector>

#include "dapple/cost/cost_model.h"

namespace dapple {

// Ascending last-layer indices of the blocks; the last one is num_layers - 1.
// With num_layers <= max_blocks: every layer. Otherwise the K-1 inner ends are placed near
// the k/K quantiles of the cumulative compute (forward + backward at the profile batch
// size), each at the boundary of smallest cut size within half a block of its quantile
// (ties: the one nearest the quantile), so stages do not end inside a branch of the graph
// (e.g. GNMT's) when a cheap boundary is close by. REQUIRES: max_blocks >= 1.
std::vector<int> BlockEnds(const CostModel& cost, int max_blocks);

// The planners' default block count: 32, and 16 on clusters of more than 64 devices
// (where the search per block is much larger).
inline int DefaultMaxBlocks(int num_devices) { return num_devices <= 64 ? 32 : 16; }

// Replica counts the planners try for one stage with at most `max_count` devices: every
// count up to 16; beyond, 1..8, the powers of two, the multiples of `server_size` (up to
// 64; beyond, the server size times a power of two) and `max_count` itself. Ascending,
// unique.
std::vector<int> ReplicaCounts(int max_count, int server_size);

}  // namespace dapple
