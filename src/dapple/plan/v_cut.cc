// A V plan's balanced cut: see v_cut.h.
//
// Note [A balanced V cut]
// Group g of a V runs chunk g down and chunk 2S - 1 - g back up: taken from the outside in,
// the groups cut the model from both ends, group 0 its first and last layers, group S - 1
// the middle. Whether every group's compute can be at most T is then a walk over the
// groups: after groups 0..g-1, the layers [0, a) and [b, n) are cut, and for each a only
// the least b is kept (less left to cut). Group g takes [a, a') down and [b', b) up for any
// a' (b' the least whose compute fits in what T leaves, found by bisection on the group's
// prefix sums of per-layer compute), the last group [a, b) whole, split where its two
// chunks' compute is nearest equal. The least T the walk finds feasible is found by
// bisection between the largest layer and the whole model, O(S n^2 log n) a step. Keeping
// only the least b is exact where the groups compute alike (tests/plan/v_cut_test.cc); where
// they do not, a larger b can be better (the next group must take a layer next to b into
// its up chunk, and a faster group could have taken it), so the cut is then a good start,
// not always the least. It also ignores transfers and the fill of the pipeline: the V climb
// (Note [V shapes searched]) starts from it and takes it from there.
#include "dapple/plan/v_cut.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "dapple/common/chunk_placement.h"
#include "dapple/plan/plan_costs.h"

namespace dapple::internal {
namespace {

struct VCutter {
  int n = 0, S = 0;
  std::vector<std::vector<double>> prefix;  // prefix[g][l]: group g's compute of [0, l)
  // parent[g][a']: a for the state (a', reach) after group g (-1: unreachable).
  std::vector<std::vector<int>> parent, reach;

  double Load(int g, int lo, int hi) const { return prefix[g][hi] - prefix[g][lo]; }

  // Whether every group's compute can be at most t; fills parent and reach.
  bool Feasible(double t) {
    std::vector<int> cur(n + 1, -1);  // cur[a]: least b after the groups so far
    cur[0] = n;
    for (int g = 0; g + 1 < S; ++g) {
      std::vector<int> next(n + 1, -1), from(n + 1, -1);
      const int left = 2 * (S - 1 - g);  // layers the groups after g need at least
      for (int a = 0; a <= n; ++a) {
        const int b = cur[a];
        if (b < 0) continue;
        for (int a2 = a + 1; a2 + left < b; ++a2) {
          const double room = t - Load(g, a, a2);
          if (room < 0) break;
          // The least b2 with a2 + left <= b2 < b and Load(g, b2, b) <= room.
          const std::vector<double>& p = prefix[g];
          int b2 =
              static_cast<int>(std::lower_bound(p.begin(), p.begin() + b, p[b] - room) - p.begin());
          b2 = std::max(b2, a2 + left);
          if (b2 >= b || Load(g, b2, b) > room) continue;
          if (next[a2] < 0 || b2 < next[a2]) {
            next[a2] = b2;
            from[a2] = a;
          }
        }
      }
      parent[g] = std::move(from);
      reach[g] = next;
      cur = std::move(next);
    }
    for (int a = 0; a <= n; ++a)
      if (cur[a] >= 0 && cur[a] - a >= 2 && Load(S - 1, a, cur[a]) <= t) return true;
    return false;
  }
};

}  // namespace

std::optional<Plan> BalancedVCut(const Plan& p, const CostModel& cost) {
  if (!VShaped(p.schedule) || p.virtual_stages != 2) return std::nullopt;
  VCutter v;
  v.n = cost.num_layers();
  v.S = p.num_device_groups();
  if (2 * v.S > v.n) return std::nullopt;
  const int m = p.micro_batch_size;
  double hi = 0, lo = 0;
  v.prefix.assign(v.S, std::vector<double>(v.n + 1, 0.0));
  for (int g = 0; g < v.S; ++g) {
    const std::vector<int>& devices = p.stages[g].devices;
    for (int l = 0; l < v.n; ++l) {
      const StageCost c = EvaluateStage(cost, l, l, devices, m, 1);
      const double w =
          c.forward_ms + std::min(c.backward_ms, SplitBackwardMs(cost, l, l, devices, m));
      v.prefix[g][l + 1] = v.prefix[g][l] + w;
      lo = std::max(lo, w);
    }
    hi = std::max(hi, v.prefix[g][v.n]);
  }
  v.parent.assign(v.S, {});
  v.reach.assign(v.S, {});
  if (!v.Feasible(hi)) return std::nullopt;
  for (int step = 0; step < 40 && hi - lo > 1e-6 * hi; ++step) {
    const double mid = (lo + hi) / 2;
    (v.Feasible(mid) ? hi : lo) = mid;
  }
  v.Feasible(hi);
  // The last group's state with the least compute, then back out through the parents.
  const std::vector<int>& last = v.S > 1 ? v.reach[v.S - 2] : std::vector<int>{v.n};
  int a = -1;
  for (int x = 0; x < static_cast<int>(last.size()); ++x)
    if (last[x] >= 0 && last[x] - x >= 2 &&
        (a < 0 || v.Load(v.S - 1, x, last[x]) < v.Load(v.S - 1, a, last[a])))
      a = x;
  if (a < 0) return std::nullopt;
  std::vector<int> starts(2 * v.S + 1);  // starts[k]: first layer of chunk k; starts[2S] = n
  starts[2 * v.S] = v.n;
  int b = last[a];
  // The middle: the split of [a, b) whose two chunks' compute is nearest equal.
  int mid = a + 1;
  for (int x = a + 1; x < b; ++x)
    if (std::abs(v.Load(v.S - 1, a, x) - v.Load(v.S - 1, x, b)) <
        std::abs(v.Load(v.S - 1, a, mid) - v.Load(v.S - 1, mid, b)))
      mid = x;
  starts[v.S - 1] = a;
  starts[v.S] = mid;
  for (int g = v.S - 2; g >= 0; --g) {
    const int a_before = v.parent[g][a];
    const int b_before = g > 0 ? v.reach[g - 1][a_before] : v.n;
    starts[g] = a_before;
    starts[2 * v.S - 1 - g] = b;
    a = a_before;
    b = b_before;
  }
  return CutAt(p, starts);
}

Plan CutAt(const Plan& p, const std::vector<int>& starts) {
  const int S = p.num_device_groups();
  Plan q = p;
  q.estimate.reset();
  for (int k = 0; k < 2 * S; ++k) {
    q.stages[k].first_layer = starts[k];
    q.stages[k].last_layer = starts[k + 1] - 1;
    q.stages[k].devices = p.stages[GroupOfVirtualStage(k, S, true)].devices;
  }
  return q;
}

std::vector<std::vector<int>> EveryCut(int n, int chunks, long long most) {
  // C(n - 1, chunks - 1), stopped once above `most`.
  long long count = 1;
  for (int i = 1; i < chunks && count <= most; ++i) count = count * (n - i) / i;
  std::vector<std::vector<int>> out;
  if (chunks > n || count > most) return out;
  std::vector<int> starts(chunks + 1, 0);
  starts[chunks] = n;
  // Chunk k starts after chunk k - 1's first layer, leaving a layer to each chunk after it.
  auto each = [&](auto&& self, int k) -> void {
    if (k == chunks) {
      out.push_back(starts);
      return;
    }
    for (int s = starts[k - 1] + 1; s <= n - (chunks - k); ++s) {
      starts[k] = s;
      self(self, k + 1);
    }
  };
  if (chunks >= 1) each(each, 1);
  return out;
}

}  // namespace dapple::internal
