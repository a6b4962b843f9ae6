// The refinement's moves: see refine_moves.h.
#include "dapple/plan/refine/refine_moves.h"

#include <algorithm>
#include <cmath>

#include "dapple/plan/dp/placement.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/refine/move_context.h"

namespace dapple::internal {
namespace {

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
void KeepFastestFirst(const MoveContext& c, std::vector<int>& devices) {
  for (int d : devices) {
    if (c.cost.DeviceKind(d) != c.cost.DeviceKind(devices[0])) {
      FastestFirst(c.cluster, devices);
      return;
    }
  }
}

}  // namespace

void AddNeighbour(MoveContext& c, std::vector<Neighbour>& out, Plan p, const char* move) {
  if (!FitMicroBatch(p, c.o.sizes)) return;
  for (StagePlan& s : p.stages) KeepFastestFirst(c, s.devices);
  PlanCosts costs;
  const Plan* base = c.base_costs ? &c.base : nullptr;
  if (RecomputeWhereNeeded(p, c.cost, c.o.forward_timed, &costs, base, c.base_costs, c.shard_memo,
                           c.o.recompute_memo))
    costs = base ? EvaluatePlanFrom(p, *base, *c.base_costs, c.cost)
                 : EvaluatePlan(p, c.cost);  // what it evaluated was without re-computation
  p.estimate.reset();
  out.push_back({std::move(p), move, std::move(costs)});
}

namespace {

// The unused device that suits a stage on `devices` best: one on a server the stage
// already uses (the server with most of them), else the lowest id (on a mixed cluster the
// fastest). -1 when none.
int PickUnused(const MoveContext& c, const std::vector<int>& devices) {
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
int PickGiven(const MoveContext& c, const std::vector<int>& from, const std::vector<int>& to) {
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
double Work(const MoveContext& c, int first, int last, int device) {
  const double pbs = c.cost.profile_batch_size();
  return c.cost.ForwardMs(first, last, pbs, device) + c.cost.BackwardMs(first, last, pbs, device);
}

void Boundaries(MoveContext& c, const Plan& p, std::vector<Neighbour>& out) {
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
        AddNeighbour(c, out, std::move(q), "boundary");
      }
    }
  }
}

void Devices(MoveContext& c, const Plan& p, std::vector<Neighbour>& out) {
  const int S = p.num_stages();
  for (int a = 0; a < S; ++a) {
    if (p.stages[a].replicas() < 2) continue;
    for (int b = 0; b < S; ++b) {
      if (b == a) continue;
      Plan q = p;
      const int d = PickGiven(c, q.stages[a].devices, q.stages[b].devices);
      Erase(q.stages[a].devices, d);
      Insert(q.stages[b].devices, d);
      AddNeighbour(c, out, std::move(q), "move-device");
    }
    Plan q = p;
    q.stages[a].devices.pop_back();
    AddNeighbour(c, out, std::move(q), "remove-device");
  }
  for (int b = 0; b < S; ++b) {
    const int u = PickUnused(c, p.stages[b].devices);
    if (u < 0) break;
    Plan q = p;
    Insert(q.stages[b].devices, u);
    AddNeighbour(c, out, std::move(q), "add-device");
  }
  // Placement: device da of stage a and db of stage b, on another server, change places.
  auto swap = [&](int a, int da, int b, int db) {
    if (c.server_of[da] == c.server_of[db]) return;
    Plan q = p;
    Erase(q.stages[a].devices, da);
    Erase(q.stages[b].devices, db);
    Insert(q.stages[a].devices, db);
    Insert(q.stages[b].devices, da);
    AddNeighbour(c, out, std::move(q), "swap");
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

void Merges(MoveContext& c, const Plan& p, std::vector<Neighbour>& out) {
  for (int b = 0; b + 1 < p.num_stages(); ++b) {
    Plan q = p;
    StagePlan& lo = q.stages[b];
    const StagePlan& hi = q.stages[b + 1];
    lo.last_layer = hi.last_layer;
    for (int d : hi.devices) Insert(lo.devices, d);
    q.stages.erase(q.stages.begin() + b + 1);
    AddNeighbour(c, out, std::move(q), "merge");
  }
}

// The last layer of the first half when stage `st` splits: its compute midpoint.
int SplitCut(const MoveContext& c, const StagePlan& st) {
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

void Splits(MoveContext& c, const Plan& p, std::vector<Neighbour>& out) {
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
      AddNeighbour(c, out,
                   Split(p, s, cut, {st.devices.begin(), st.devices.begin() + k},
                         {st.devices.begin() + k, st.devices.end()}),
                   "split");
    }
    const int u = PickUnused(c, st.devices);
    if (u >= 0) AddNeighbour(c, out, Split(p, s, cut, st.devices, {u}), "split");
  }
}

// Note [Splitting with a borrowed device]
// A stage of one device can split only onto a device no stage uses, and a plan that uses
// every device has none: freeing one (remove-device) and then splitting are two moves, the
// first mostly slower alone. The optimum often has one more, narrower stage than a plan that uses
// every device (on servers of 5 or 6 devices at m = 2, say). So a stage also splits with one half
// on a device taken from another stage of several replicas (the one PickGiven gives), the other
// half keeping its devices, either way round.
void SplitsBorrowing(MoveContext& c, const Plan& p, std::vector<Neighbour>& out) {
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
      AddNeighbour(c, out, Split(lent, s, cut, st.devices, {d}), "split-borrow");
      AddNeighbour(c, out, Split(lent, s, cut, {d}, st.devices), "split-borrow");
    }
  }
}

void Batching(MoveContext& c, const Plan& p, std::vector<Neighbour>& out) {
  const auto& sizes = c.o.sizes;
  auto at = std::find(sizes.begin(), sizes.end(), p.micro_batch_size);
  if (at != sizes.end()) {
    for (auto it : {at - (at == sizes.begin() ? 0 : 1), at + 1}) {
      if (it == at || it == sizes.end() || *it < MaxReplicas(p)) continue;
      Plan q = p;
      q.micro_batch_size = *it;
      q.num_micro_batches = p.global_batch_size / *it;
      AddNeighbour(c, out, std::move(q), "micro-batch");
    }
  }
  for (ScheduleKind k : c.o.schedules) {
    if (k == p.schedule) continue;
    Plan q = p;
    q.schedule = k;
    AddNeighbour(c, out, std::move(q), "schedule");
  }
}

}  // namespace

std::vector<Neighbour> Neighbours(const Plan& plan, const CostModel& cost, const Cluster& cluster,
                                  const RefineOptions& options, const PlanCosts* plan_costs,
                                  ShardMemo* shard_memo, Moves moves,
                                  RebalanceMemo* rebalance_memo) {
  ShardMemo own;
  RebalanceMemo own_rebalance;
  MoveContext c{cost,
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
