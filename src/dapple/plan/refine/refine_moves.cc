// The refinement's moves: see refine_moves.h.
#include "dapple/plan/refine/refine_moves.h"

#include <algorithm>
#include <cmath>

#include "dapple/plan/dp/placement.h"
#include "dapple/plan/plan_costs.h"

namespace dapple::internal {
namespace {

struct Ctx {
  const CostModel& cost;
  const Cluster& cluster;
  const RefineOptions& o;
  const Plan& base;             // the plan whose neighbours these are
  const PlanCosts* base_costs;  // its EvaluatePlan, when known
  std::vector<int> unused;      // devices no stage has, ascending
  std::vector<int> server_of;   // device -> server (Cluster::ServerOf scans the servers)
  ShardMemo* shard_memo;        // the neighbours' stages are mostly the plan's
  RebalanceMemo* rebalance_memo;
};

int MaxReplicas(const Plan& p) {
  int r = 1;
  for (const StagePlan& s : p.stages) r = std::max(r, s.replicas());
  return r;
}

// Gives every replica a sample: raises m to the smallest allowed size >= the most
// replicas of a stage. False when there is none.
bool FitMicroBatch(Plan& p, const std::vector<int>& sizes) {
  const int need = MaxReplicas(p);
  if (need <= p.micro_batch_size) return true;
  for (int m : sizes) {
    if (m >= need) {
      p.micro_batch_size = m;
      p.num_micro_batches = p.global_batch_size / m;
      return true;
    }
  }
  return false;
}

// On a mixed cluster a stage lists its fastest devices first (Note [Placement on mixed
// clusters] in placement.h); a move may have inserted one elsewhere.
void KeepFastestFirst(const Ctx& c, std::vector<int>& devices) {
  for (int d : devices) {
    if (c.cost.DeviceKind(d) != c.cost.DeviceKind(devices[0])) {
      FastestFirst(c.cluster, devices);
      return;
    }
  }
}

void Add(Ctx& c, std::vector<Neighbour>& out, Plan p, const char* move) {
  if (!FitMicroBatch(p, c.o.sizes)) return;
  for (StagePlan& s : p.stages) KeepFastestFirst(c, s.devices);
  PlanCosts costs;
  const Plan* base = c.base_costs ? &c.base : nullptr;
  if (RecomputeWhereNeeded(p, c.cost, c.o.forward_timed, &costs, base, c.base_costs, c.shard_memo))
    costs = base ? EvaluatePlanFrom(p, *base, *c.base_costs, c.cost)
                 : EvaluatePlan(p, c.cost);  // what it evaluated was without re-computation
  p.estimate.reset();
  out.push_back({std::move(p), move, std::move(costs)});
}

// The unused device that suits a stage on `devices` best: one on a server the stage
// already uses (the server with most of them), else the lowest id (on a mixed cluster the
// fastest). -1 when none.
int PickUnused(const Ctx& c, const std::vector<int>& devices) {
  if (c.unused.empty()) return -1;
  std::vector<int> on_server(c.cluster.num_servers(), 0);  // the stage's devices per server
  for (int d : devices) ++on_server[c.server_of[d]];
  int best = -1, best_count = 0;
  for (int u : c.unused) {
    const int count = on_server[c.server_of[u]];
    if (count > best_count) best = u, best_count = count;
  }
  if (best >= 0) return best;
  int fastest = c.unused.front();
  for (int u : c.unused)
    if (c.cost.DeviceKind(u) != c.cost.DeviceKind(fastest) &&
        c.cluster.Device(u).speed > c.cluster.Device(fastest).speed)
      fastest = u;
  return fastest;
}

// The device of `from` to give to a stage on `to`: one on a server `to` uses, else the
// last one.
int PickGiven(const Ctx& c, const std::vector<int>& from, const std::vector<int>& to) {
  std::vector<char> to_server(c.cluster.num_servers(), 0);  // servers `to` uses
  for (int d : to) to_server[c.server_of[d]] = 1;
  for (auto it = from.rbegin(); it != from.rend(); ++it)
    if (to_server[c.server_of[*it]]) return *it;
  return from.back();
}

void Insert(std::vector<int>& devices, int d) {
  devices.insert(std::upper_bound(devices.begin(), devices.end(), d), d);
}

void Erase(std::vector<int>& devices, int d) {
  devices.erase(std::find(devices.begin(), devices.end(), d));
}

// F + B of layers [first, last] for the profile batch on the stage's first device.
double Work(const Ctx& c, int first, int last, int device) {
  const double pbs = c.cost.profile_batch_size();
  return c.cost.ForwardMs(first, last, pbs, device) + c.cost.BackwardMs(first, last, pbs, device);
}

void Boundaries(Ctx& c, const Plan& p, std::vector<Neighbour>& out) {
  for (int b = 0; b + 1 < p.num_stages(); ++b) {
    const StagePlan &lo = p.stages[b], &hi = p.stages[b + 1];
    for (int step = 1;
         step <= std::max(lo.last_layer - lo.first_layer, hi.last_layer - hi.first_layer);
         step *= 2) {
      for (int sign : {1, -1}) {
        const int last = lo.last_layer + sign * step;
        if (last < lo.first_layer || last >= hi.last_layer) continue;
        Plan q = p;
        q.stages[b].last_layer = last;
        q.stages[b + 1].first_layer = last + 1;
        Add(c, out, std::move(q), "boundary");
      }
    }
  }
}

void Devices(Ctx& c, const Plan& p, std::vector<Neighbour>& out) {
  const int S = p.num_stages();
  for (int a = 0; a < S; ++a) {
    if (p.stages[a].replicas() < 2) continue;
    for (int b = 0; b < S; ++b) {
      if (b == a) continue;
      Plan q = p;
      const int d = PickGiven(c, q.stages[a].devices, q.stages[b].devices);
      Erase(q.stages[a].devices, d);
      Insert(q.stages[b].devices, d);
      Add(c, out, std::move(q), "move-device");
    }
    Plan q = p;
    q.stages[a].devices.pop_back();
    Add(c, out, std::move(q), "remove-device");
  }
  for (int b = 0; b < S; ++b) {
    const int u = PickUnused(c, p.stages[b].devices);
    if (u < 0) break;
    Plan q = p;
    Insert(q.stages[b].devices, u);
    Add(c, out, std::move(q), "add-device");
  }
  // Placement: device da of stage a and db of stage b, on another server, change places.
  auto swap = [&](int a, int da, int b, int db) {
    if (c.server_of[da] == c.server_of[db]) return;
    Plan q = p;
    Erase(q.stages[a].devices, da);
    Erase(q.stages[b].devices, db);
    Insert(q.stages[a].devices, db);
    Insert(q.stages[b].devices, da);
    Add(c, out, std::move(q), "swap");
  };
  for (int a = 0; a < S; ++a)
    for (int b = a + 1; b < S; ++b)
      swap(a, p.stages[a].devices.back(), b, p.stages[b].devices.front());
  // On a mixed cluster also the other way round: a's fastest device (its first) for b's
  // slowest (its last), so that a later stage can get a faster device too.
  for (int a = 0; a < S; ++a) {
    for (int b = a + 1; b < S; ++b) {
      const int da = p.stages[a].devices.front(), db = p.stages[b].devices.back();
      if (c.cost.DeviceKind(da) != c.cost.DeviceKind(db)) swap(a, da, b, db);
    }
  }
}

void Merges(Ctx& c, const Plan& p, std::vector<Neighbour>& out) {
  for (int b = 0; b + 1 < p.num_stages(); ++b) {
    Plan q = p;
    StagePlan& lo = q.stages[b];
    const StagePlan& hi = q.stages[b + 1];
    lo.last_layer = hi.last_layer;
    for (int d : hi.devices) Insert(lo.devices, d);
    q.stages.erase(q.stages.begin() + b + 1);
    Add(c, out, std::move(q), "merge");
  }
}

// The last layer of the first half when stage `st` splits: its compute midpoint.
int SplitCut(const Ctx& c, const StagePlan& st) {
  const int dev = st.devices.front();
  const double total = Work(c, st.first_layer, st.last_layer, dev);
  int cut = st.first_layer;
  double best = 1e300;
  for (int l = st.first_layer; l < st.last_layer; ++l) {
    double gap = std::abs(2 * Work(c, st.first_layer, l, dev) - total);
    if (gap < best) best = gap, cut = l;
  }
  return cut;
}

// `p` with stage s split after layer `cut`, its halves on `lo` and `hi`.
Plan Split(const Plan& p, int s, int cut, std::vector<int> lo, std::vector<int> hi) {
  Plan q = p;
  StagePlan second = q.stages[s];
  q.stages[s].last_layer = cut;
  q.stages[s].devices = std::move(lo);
  second.first_layer = cut + 1;
  second.devices = std::move(hi);
  q.stages.insert(q.stages.begin() + s + 1, std::move(second));
  return q;
}

void Splits(Ctx& c, const Plan& p, std::vector<Neighbour>& out) {
  const int S = p.num_stages();
  for (int s = 0; s < S; ++s) {
    const StagePlan& st = p.stages[s];
    if (st.first_layer == st.last_layer) continue;
    const int cut = SplitCut(c, st);
    const int r = st.replicas();
    if (r >= 2) {  // the devices shared in proportion to the two halves' compute
      const int dev = st.devices.front();
      const double share = Work(c, st.first_layer, cut, dev) /
                           std::max(Work(c, st.first_layer, st.last_layer, dev), 1e-300);
      const int k = std::clamp(static_cast<int>(std::lround(share * r)), 1, r - 1);
      Add(c, out,
          Split(p, s, cut, {st.devices.begin(), st.devices.begin() + k},
                {st.devices.begin() + k, st.devices.end()}),
          "split");
    }
    const int u = PickUnused(c, st.devices);
    if (u >= 0) Add(c, out, Split(p, s, cut, st.devices, {u}), "split");
  }
}

// Note [Splitting with a borrowed device]
// A stage of one device can split only onto a device no stage uses, and a plan that uses
// every device has none: freeing one (remove-device) and then splitting are two moves, the
// first mostly slower alone. On servers of 5 or 6 devices at m = 2 the optimum often has one
// more, narrower stage than the planner's plan (10 layers, 2 x 5 devices, GBS 72: 7 stages
// against 6, 3.3% faster). So a stage also splits with one half on a device taken from
// another stage of several replicas (the one PickGiven gives), the other half keeping its
// devices, either way round.
void SplitsBorrowing(Ctx& c, const Plan& p, std::vector<Neighbour>& out) {
  const int S = p.num_stages();
  for (int s = 0; s < S; ++s) {
    const StagePlan& st = p.stages[s];
    if (st.first_layer == st.last_layer) continue;
    const int cut = SplitCut(c, st);
    for (int b = 0; b < S; ++b) {
      if (b == s || p.stages[b].replicas() < 2) continue;
      const int d = PickGiven(c, p.stages[b].devices, st.devices);
      Plan lent = p;
      Erase(lent.stages[b].devices, d);
      Add(c, out, Split(lent, s, cut, st.devices, {d}), "split-borrow");
      Add(c, out, Split(lent, s, cut, {d}, st.devices), "split-borrow");
    }
  }
}

// The device groups of `p`'s stages, in order.
std::vector<std::vector<int>> GroupsOf(const Plan& p) {
  std::vector<std::vector<int>> groups;
  for (const StagePlan& st : p.stages) groups.push_back(st.devices);
  return groups;
}

// `p` with its stages on `groups` (one per stage, in order) and the layers cut anew over them
// so that the largest stage compute is smallest (BalancedPlanOnGroups), as `move`; nothing
// when that is `p` itself.
void Rebalanced(Ctx& c, const Plan& p, std::vector<std::vector<int>> groups, const char* move,
                std::vector<Neighbour>& out) {
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
  if (!same) Add(c, out, std::move(q), move);
}

// Note [Rebalancing the layers]
// The boundary moves shift one boundary at a time, and a plan whose widths changed (a split,
// a device moved) may want several shifted at once, each slower alone (10 layers, 2 x 6
// devices of two speeds, GBS 24: two boundaries two layers away, 2% faster together). So
// the layers are also cut anew over the plan's device groups so that the largest stage
// compute is smallest (BalancedPlanOnGroups, the partition of the even-width starts).
void Rebalance(Ctx& c, const Plan& p, std::vector<Neighbour>& out) {
  if (p.virtual_stages != 1 || p.num_stages() < 2) return;
  Rebalanced(c, p, GroupsOf(p), "rebalance", out);
}

// Note [Regrouping the stages]
// The moves keep the order in which the pipeline visits its device groups, and so which
// servers its stages follow one another on: a narrow stage in the middle stays there, and a
// pipeline that fills one server and then the other never comes back to the first. The
// medium problems' optima often order their widths otherwise (10 layers, 2 x 6 devices,
// GBS 30: [1+2+2+2+2+2+1] on servers A, A, B, B, B, A, A against the DP's 2, 2, 2 on one
// server and 1, 2, 2, 1 on the other), or put a fast server's single devices between slow
// pairs. So the regrouped plans exchange the device groups of two stages (groups alike in
// width, servers and kinds of device excepted: that is the same plan again on a cluster of
// identical servers) and cut the layers anew over the groups in their new order. So do the
// plans with one stage's group left out, its devices unused: a merge leaves two groups' devices
// on one stage and the layers where they were, each slower alone (11 layers, 2 x 6 devices,
// GBS 30: the optimum is the planner's 7 stages without the pair that held one layer, 4.1%
// faster). Most are much slower than the plan until the climb adapts them (Note [Regrouping at
// a local optimum] in refine.cc).
void Regroups(Ctx& c, const Plan& p, std::vector<Neighbour>& out) {
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

void Batching(Ctx& c, const Plan& p, std::vector<Neighbour>& out) {
  const auto& sizes = c.o.sizes;
  auto at = std::find(sizes.begin(), sizes.end(), p.micro_batch_size);
  if (at != sizes.end()) {
    for (auto it : {at - (at == sizes.begin() ? 0 : 1), at + 1}) {
      if (it == at || it == sizes.end() || *it < MaxReplicas(p)) continue;
      Plan q = p;
      q.micro_batch_size = *it;
      q.num_micro_batches = p.global_batch_size / *it;
      Add(c, out, std::move(q), "micro-batch");
    }
  }
  for (ScheduleKind k : c.o.schedules) {
    if (k == p.schedule) continue;
    Plan q = p;
    q.schedule = k;
    Add(c, out, std::move(q), "schedule");
  }
}

}  // namespace

std::vector<Neighbour> Neighbours(const Plan& plan, const CostModel& cost, const Cluster& cluster,
                                  const RefineOptions& options, const PlanCosts* plan_costs,
                                  ShardMemo* shard_memo, Moves moves,
                                  RebalanceMemo* rebalance_memo) {
  ShardMemo own;
  RebalanceMemo own_rebalance;
  Ctx c{cost,
        cluster,
        options,
        plan,
        plan_costs,
        {},
        {},
        shard_memo ? shard_memo : &own,
        rebalance_memo ? rebalance_memo : &own_rebalance};
  for (int s = 0; s < cluster.num_servers(); ++s)
    c.server_of.resize(c.server_of.size() + cluster.servers[s].devices, s);
  std::vector<bool> used(cluster.num_devices(), false);
  for (const StagePlan& s : plan.stages)
    for (int d : s.devices) used[d] = true;
  for (int d = 0; d < cluster.num_devices(); ++d)
    if (!used[d]) c.unused.push_back(d);
  std::vector<Neighbour> out;
  if (moves == Moves::kRegroup) {
    Regroups(c, plan, out);
    return out;
  }
  if (moves == Moves::kWide) {
    SplitsBorrowing(c, plan, out);
    Rebalance(c, plan, out);
    return out;
  }
  Boundaries(c, plan, out);
  Devices(c, plan, out);
  Merges(c, plan, out);
  Splits(c, plan, out);
  Batching(c, plan, out);
  return out;
}

}  // namespace dapple::internal
