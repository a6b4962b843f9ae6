// Interleaved proposals: see interleaving.h and Note [Interleaving a plan].
#include "dapple/plan/interleaving.h"

#include <algorithm>
#include <cmath>

#include "dapple/common/error.h"

namespace dapple {

// Note [Interleaving a plan]: the planner searches partitions with one chunk per stage (its
// DP, baselines and refinement); interleaving is then offered on the winner's device groups.
// The chunks must keep each group's load: base's stage g takes a share of the model's
// compute that already reflects its width and speed (a wider group got more layers), so
// every round of chunks (g = 0..S-1) covers 1/v of the model's compute, cut among the groups
// in those shares. Chunk boundaries are the layer boundaries nearest to the targets, every
// chunk keeping at least one layer. The simulator then scores the proposals with the rest.
namespace {

// `base`'s groups with the model cut into v chunks per group: chunk k on group
// GroupOfVirtualStage(k) (looped, or in a V for a V-shaped `kind`), each round of S chunks
// 1/v of the model's compute cut among the groups in base's shares (`by_width`: in shares of
// their replicas), in the order the round visits the groups. REQUIRES: S * v <= layers.
Plan CutIntoChunks(const Plan& base, int v, ScheduleKind kind, const CostModel& cost,
                   bool by_width = false) {
  const int S = base.num_stages(), n = cost.num_layers(), V = S * v;
  // prefix[i]: compute of layers 0..i-1 (forward + backward at the profile's batch).
  std::vector<double> prefix(n + 1, 0.0);
  const double pbs = cost.profile_batch_size();
  for (int l = 0; l < n; ++l)
    prefix[l + 1] = prefix[l] + cost.ForwardMs(l, l, pbs, 0) + cost.BackwardMs(l, l, pbs, 0);
  const bool timed = prefix[n] > 0;
  if (!timed)
    for (int l = 0; l <= n; ++l) prefix[l] = l;  // no times: cut by layer counts
  const double total = prefix[n];
  std::vector<double> cum_share(S + 1, 0.0);  // of base's stages 0..g-1
  for (int g = 0; g < S; ++g)
    cum_share[g + 1] = by_width
                           ? cum_share[g] + 1.0 * base.stages[g].replicas() / base.num_devices()
                           : prefix[base.stages[g].last_layer + 1] / total;
  Plan p = base;
  p.schedule = kind;
  p.virtual_stages = v;
  p.recompute = false;
  p.estimate.reset();
  p.stages.clear();
  const bool v_shape = VShaped(kind);
  int begin = 0;  // first layer of chunk k
  for (int k = 0; k < V; ++k) {
    const int r = k / S, g = GroupOfVirtualStage(k, S, v_shape);
    // A round in a V visits the groups backwards: it ends where group g's share begins.
    const double within = v_shape && r % 2 == 1 ? 1 - cum_share[g] : cum_share[g + 1];
    const double target = (r + within) * total / v;
    // End boundary b (chunk = layers begin..b-1) nearest the target, leaving a layer for
    // each chunk after it.
    const int lo = begin + 1, hi = n - (V - 1 - k);
    int best = k + 1 == V ? n : lo;
    for (int b = lo; b <= hi && k + 1 < V; ++b)
      if (std::abs(prefix[b] - target) < std::abs(prefix[best] - target)) best = b;
    StagePlan st;
    st.first_layer = begin;
    st.last_layer = best - 1;
    st.devices = base.stages[g].devices;
    st.recompute = false;
    p.stages.push_back(st);
    begin = best;
  }
  return p;
}

}  // namespace

std::optional<Plan> InterleavePlan(const Plan& base, int v, const CostModel& cost) {
  const int S = base.num_stages(), n = cost.num_layers(), V = S * v, M = base.num_micro_batches;
  if (S < 2 || v < 2 || V > n || base.virtual_stages != 1 || M < S || M % S != 0)
    return std::nullopt;
  if (base.AnyRecompute()) return std::nullopt;  // not built with interleaving
  return CutIntoChunks(base, v, ScheduleKind::kInterleaved, cost);
}

// Note [V shapes from a plan]: the V-shape schedules are offered as interleaving is, on the
// device groups of plans with one chunk per stage (the winner's and each family's; with the
// schedule fixed to a V, zb-h1's winner, whose split backward and peak of S micro-batches
// are zb-v's; when none fits, every proposal made without the memory limit). Each group runs
// chunk g down the V and chunk 2S - 1 - g back up, each half of the model cut in base's shares
// of compute. Where memory bound base's partition those shares are skewed (an early stage
// of 1F1B holds more micro-batches, so it got fewer layers) while every group of a V holds
// about the same, so the groups' shares by width are offered too. The fastest is then re-cut
// and regrouped (Note [V shapes searched] in v_search.cc).
std::optional<Plan> VShapePlan(const Plan& base, ScheduleKind kind, const CostModel& cost,
                               bool by_width) {
  DAPPLE_CHECK(VShaped(kind));
  if (2 * base.num_stages() > cost.num_layers() || base.virtual_stages != 1) return std::nullopt;
  return CutIntoChunks(base, 2, kind, cost, by_width);
}

std::vector<Proposal> VShapeProposals(const Plan& base, const CostModel& cost,
                                      const std::vector<int>& sizes, int global_batch,
                                      const std::vector<ScheduleKind>& kinds) {
  std::vector<Proposal> out;
  if (base.virtual_stages != 1) return out;
  int widest = 0;
  for (const StagePlan& st : base.stages) widest = std::max(widest, st.replicas());
  for (ScheduleKind kind : kinds) {
    for (int m : sizes) {
      if (m < widest || global_batch % m != 0) continue;
      Plan b = base;
      b.micro_batch_size = m;
      b.num_micro_batches = global_batch / m;
      for (bool by_width : {false, true})
        if (std::optional<Plan> p = VShapePlan(b, kind, cost, by_width))
          out.push_back({std::move(*p), ToString(kind)});
    }
  }
  return out;
}

std::vector<Proposal> InterleavedProposals(const Plan& base, const CostModel& cost,
                                           const std::vector<int>& sizes, int global_batch) {
  std::vector<Proposal> out;
  const int S = base.num_stages();
  if (S < 2 || base.virtual_stages != 1) return out;
  int widest = 0;
  for (const StagePlan& st : base.stages) widest = std::max(widest, st.replicas());
  for (int v = 2; S * v <= cost.num_layers(); v *= 2) {
    for (int m : sizes) {
      if (m < widest || global_batch % m != 0) continue;
      Plan b = base;
      b.micro_batch_size = m;
      b.num_micro_batches = global_batch / m;
      if (std::optional<Plan> p = InterleavePlan(b, v, cost))
        out.push_back({std::move(*p), "interleaved"});
    }
  }
  return out;
}

}  // namespace dapple
