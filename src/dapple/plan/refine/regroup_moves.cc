// The rebalanced and regrouped neighbours of the refinement: see move_context.h.
#include <utility>

#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/refine/move_context.h"

namespace dapple::internal {
namespace {

// The device groups of `p`'s stages, in order.
std::vector<std::vector<int>> GroupsOf(const Plan& p) {
  std::vector<std::vector<int>> groups;
  for (const StagePlan& st : p.stages) groups.push_back(st.devices);
  return groups;
}

// `p` with its stages on `groups` (one per stage, in order) and the layers cut anew over them
// so that the largest stage compute is smallest (BalancedPlanOnGroups), as `move`; nothing
// when that is `p` itself.
void Rebalanced(MoveContext& c, const Plan& p, std::vector<std::vector<int>> groups,
                const char* move, std::vector<Neighbour>& out) {
  auto [it, fresh] =
      c.rebalance_memo->last_layers.try_emplace({p.micro_batch_size, std::move(groups)});
  const std::vector<std::vector<int>>& on = it->first.second;
  std::vector<int>& last = it->second;
  if (fresh) {
    const Plan balanced =
        BalancedPlanOnGroups(c.cost, on, {p.micro_batch_size, p.num_micro_batches}, p.schedule,
                             move, c.o.group_work ? c.o.group_work : &c.rebalance_memo->work);
    for (const StagePlan& st : balanced.stages) last.push_back(st.last_layer);
  }
  Plan q = p;
  q.stages.resize(on.size());
  bool same = on.size() == p.stages.size();
  for (int s = 0; s < q.num_stages(); ++s) {
    same = same && p.stages[s].last_layer == last[s] && p.stages[s].devices == on[s];
    q.stages[s].first_layer = s == 0 ? 0 : last[s - 1] + 1;
    q.stages[s].last_layer = last[s];
    q.stages[s].devices = on[s];
  }
  if (!same) AddNeighbour(c, out, std::move(q), move);
}

}  // namespace

// Note [Rebalancing the layers]
// The boundary moves shift one boundary at a time, and a plan whose widths changed (a split,
// a device moved) may want several shifted at once, each slower alone. So
// the layers are also cut anew over the plan's device groups so that the largest stage
// compute is smallest (BalancedPlanOnGroups, the partition of the even-width starts).
void Rebalance(MoveContext& c, const Plan& p, std::vector<Neighbour>& out) {
  if (p.virtual_stages != 1 || p.num_stages() < 2) return;
  Rebalanced(c, p, GroupsOf(p), "rebalance", out);
}

// Note [Regrouping the stages]
// The moves keep the order in which the pipeline visits its device groups, and so which
// servers its stages follow one another on: a narrow stage in the middle stays there, and a
// pipeline that fills one server and then the other never comes back to the first. The
// medium problems' optima often order their widths otherwise (the narrow stages at both
// ends on one server, the wide ones between them on the other), or put a fast server's single
// devices between slow pairs. So the regrouped plans exchange the device groups of two stages
// (groups alike in width, servers and kinds of device excepted: that is the same plan again on a
// cluster of identical servers) and cut the layers anew over the groups in their new order. So do
// the plans with one stage's group left out, its devices unused: a merge leaves two groups' devices
// on one stage and the layers where they were, each slower alone. Most are much slower than the
// plan until the climb adapts them (Note [Regrouping at a local optimum] in refine.cc).
void Regroups(MoveContext& c, const Plan& p, std::vector<Neighbour>& out) {
  if (p.virtual_stages != 1 || p.num_stages() < 2) return;
  const std::vector<std::vector<int>> groups = GroupsOf(p);
  auto alike = [&](const std::vector<int>& a, const std::vector<int>& b) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (c.server_of[a[k]] != c.server_of[b[k]] ||
          c.cost.DeviceKind(a[k]) != c.cost.DeviceKind(b[k]))
        return false;
    return true;
  };
  for (size_t i = 0; i < groups.size(); ++i) {
    for (size_t j = i + 1; j < groups.size(); ++j) {
      if (alike(groups[i], groups[j])) continue;
      std::vector<std::vector<int>> swapped = groups;
      std::swap(swapped[i], swapped[j]);
      Rebalanced(c, p, std::move(swapped), "regroup", out);
    }
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    // Leaving out either of two alike neighbours leaves alike groups in the same order.
    if (i + 1 < groups.size() && alike(groups[i], groups[i + 1])) continue;
    std::vector<std::vector<int>> fewer = groups;
    fewer.erase(fewer.begin() + i);
    Rebalanced(c, p, std::move(fewer), "drop-group", out);
  }
}

}  // namespace dapple::internal
