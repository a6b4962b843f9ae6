// Internal to plan/: a V plan's cut with its groups' compute balanced (Note [A balanced V
// cut] in v_cut.cc).
#pragma once

#include <optional>
#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/format/plan.h"

namespace dapple::internal {

// The V plan `p` (S groups, 2S chunks, Note [V placement]) with its chunks re-cut so that
// the largest compute of a group, its two chunks' forward and backward (the lesser of B and
// I + W) at p's micro-batch size, is least (on groups that compute alike; else about least:
// Note [A balanced V cut]); the rest of p kept. nullopt when p is not a V.
std::optional<Plan> BalancedVCut(const Plan& p, const CostModel& cost);

// The V plan `p` with its chunks cut at `starts` (chunk k's first layer: starts[k], k < 2S;
// starts[2S] = the layers), each chunk on its group's devices.
Plan CutAt(const Plan& p, const std::vector<int>& starts);

// Every cut of n layers into `chunks` non-empty chunks (as CutAt's starts), when there are
// at most `most`; none when there are more.
std::vector<std::vector<int>> EveryCut(int n, int chunks, long long most);

}  // namespace dapple::internal
