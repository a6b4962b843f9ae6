// Re-computation per layer in the planner: see recompute_choice.h.
#include "dapple/plan/recompute_choice.h"

#include <algorithm>
#include <limits>

#include "dapple/common/error.h"
#include "dapple/common/slicing.h"
#include "dapple/schedule/schedule.h"
#include "dapple/schedule/shape_memo.h"

namespace dapple {

namespace {

// HeldAtPeaks of every stage under a split backward, counted on the schedule's lists.
std::vector<std::vector<HeldMicroBatches>> CountHeldAtPeaks(ScheduleKind kind, int S, int M) {
  const Schedule schedule = MakeSchedule(kind, S, M);
  std::vector<std::vector<HeldMicroBatches>> all;
  auto dominated = [](const HeldMicroBatches& a, const HeldMicroBatches& b) {
    return a.in_flight <= b.in_flight && a.rebuilt <= b.rebuilt;
  };
  for (const std::vector<Instruction>& program : schedule.programs) {
    std::vector<HeldMicroBatches>& peaks = all.emplace_back();
    HeldMicroBatches now;
    for (const Instruction& in : program) {
      if (in.op == Op::kForward) ++now.in_flight;
      if (in.op == Op::kInputGrad) ++now.rebuilt;
      if (in.op == Op::kWeightGrad) --now.in_flight, --now.rebuilt;
      if (in.op != Op::kForward && in.op != Op::kInputGrad) continue;
      if (std::any_of(peaks.begin(), peaks.end(),
                      [&](const HeldMicroBatches& p) { return dominated(now, p); }))
        continue;
      std::erase_if(peaks, [&](const HeldMicroBatches& p) { return dominated(p, now); });
      peaks.push_back(now);
    }
  }
  return all;
}

}  // namespace

// The planner asks for the same (kind, S, M) for every stage of every plan it weighs with
// re-computation, and a whole schedule is made to count them: kept once per process.
std::vector<HeldMicroBatches> HeldAtPeaks(ScheduleKind kind, int s, int S, int M) {
  if (!SplitsBackward(kind)) return {{PeakInFlight(kind, s, S, M), 0}};
  static ShapeMemo<std::vector<std::vector<HeldMicroBatches>>> memo;
  return memo.Get(kind, S, M, [&] { return CountHeldAtPeaks(kind, S, M); })->at(s);
}

double HeldActivationBytes(const RecomputeBytes& b, const std::vector<HeldMicroBatches>& held,
                           bool split) {
  double most = 0;
  for (const HeldMicroBatches& h : held)
    most = std::max(most, h.in_flight * b.kept + h.rebuilt * b.rebuilt);
  return most + (split ? 0.0 : b.rebuilt_peak);
}

LayerCosts CostsOfLayers(const RecomputeProblem& p) {
  const CostModel& cost = *p.cost;
  const int r = static_cast<int>(p.devices.size());
  const double samples = static_cast<double>(SliceOf(p.micro_batch, r, 0).size());
  LayerCosts c;
  for (int l = p.first; l <= p.last; ++l) {
    c.activation_bytes.push_back(cost.ActivationBytes(l, l, samples));
    c.input_bytes.push_back(cost.StageInputBytes(l, samples));
    double ms = 0;
    for (int j = 0; j < r; ++j) {
      const double n = static_cast<double>(SliceOf(p.micro_batch, r, j).size());
      if (n > 0) ms = std::max(ms, cost.ForwardMs(l, l, n, p.devices[j]));
    }
    c.forward_ms.push_back(ms);
  }
  return c;
}

double HeldBytesOf(const RecomputeProblem& p, const LayerCosts& c, const std::vector<int>& layers) {
  return HeldActivationBytes(BytesOf(p, c, layers), p.held, p.split);
}

RecomputeBytes BytesOf(const RecomputeProblem& p, const LayerCosts& c,
                       const std::vector<int>& layers) {
  auto act = [&](int a, int b) {
    double sum = 0;
    for (int l = a; l <= b; ++l) sum += c.activation_bytes[l - p.first];
    return sum;
  };
  return SumRecomputeBytes(p.first, p.last, layers, act,
                           [&](int l) { return c.input_bytes[l - p.first]; });
}

double ExtraForwardMsOf(const LayerCosts& c, int first, const std::vector<int>& layers) {
  double ms = 0;
  for (int l : layers) ms += c.forward_ms[l - first];
  return ms;
}

namespace {

std::vector<int> With(std::vector<int> layers, int l) {
  layers.insert(std::lower_bound(layers.begin(), layers.end(), l), l);
  return layers;
}

std::vector<int> Without(std::vector<int> layers, int l) {
  layers.erase(std::find(layers.begin(), layers.end(), l));
  return layers;
}

struct Chooser {
  const RecomputeProblem& p;
  LayerCosts c;
  bool May(int l) const { return p.forward_timed.empty() || p.forward_timed[l]; }
  bool In(const std::vector<int>& layers, int l) const {
    return std::binary_search(layers.begin(), layers.end(), l);
  }
  // Per-layer sums round differently from the cost model's figures for a range: a choice
  // within a relative 1e-12 of the budget fits.
  bool Fits(const std::vector<int>& layers) const {
    return HeldBytesOf(p, c, layers) <= p.budget_bytes * (1 + 1e-12);
  }

  // What the in-flight micro-batches hold, without the one rebuilt segment of a whole
  // backward: the part each added layer can shrink (the rebuilt segment is paid once,
  // whichever segment it is).
  double InFlight(const std::vector<int>& layers) const {
    RecomputeBytes b = BytesOf(p, c, layers);
    b.rebuilt_peak = 0;
    return HeldActivationBytes(b, p.held, p.split);
  }

  // Adds the layer that frees the most in-flight bytes per forward ms until the stage fits;
  // false when no layer frees any more.
  bool AddUntilFits(std::vector<int>& layers) const {
    while (!Fits(layers)) {
      const double held = InFlight(layers);
      int best = -1;
      double best_ratio = 0;
      for (int l = p.first; l <= p.last; ++l) {
        if (In(layers, l) || !May(l)) continue;
        const double saved = held - InFlight(With(layers, l));
        if (saved <= 0) continue;
        const double ms = c.forward_ms[l - p.first];
        const double ratio = ms > 0 ? saved / ms : std::numeric_limits<double>::infinity();
        if (best < 0 || ratio > best_ratio) best = l, best_ratio = ratio;
      }
      if (best < 0) {
        if (!AddBestRun(layers)) return false;
        continue;
      }
      layers = With(layers, best);
    }
    return true;
  }

  // No single layer frees in-flight bytes (each keeps an input as large as what it frees):
  // adds the run of layers [i, j] outside `layers` that lowers the held bytes most per ms of
  // its forward; false when none lowers them.
  bool AddBestRun(std::vector<int>& layers) const {
    const double held = HeldBytesOf(p, c, layers);
    std::vector<int> best;
    double best_ratio = 0;
    for (int i = p.first; i <= p.last; ++i) {
      std::vector<int> next = layers;
      double ms = 0;
      for (int j = i; j <= p.last && !In(layers, j) && May(j); ++j) {
        next = With(std::move(next), j);
        ms += c.forward_ms[j - p.first];
        const double saved = held - HeldBytesOf(p, c, next);
        const double ratio = ms > 0 ? saved / ms : std::numeric_limits<double>::infinity();
        if (saved > 0 && (best.empty() || ratio > best_ratio)) best = next, best_ratio = ratio;
      }
    }
    if (best.empty()) return false;
    layers = std::move(best);
    return true;
  }

  // When the greedy stalls: every layer that may re-computes but one in every `gap`
  // (the one that ends each segment and is kept), for gap = 2.., and the whole stage as one
  // segment: the one with the least extra forward that fits (a segment's rebuilt outputs
  // shrink with the gap while the kept outputs grow).
  std::optional<std::vector<int>> EvenlySpaced() const {
    std::optional<std::vector<int>> best;
    double best_ms = 0;
    const int n = p.last - p.first + 1;
    for (int gap = 2; gap <= n + 1; ++gap) {
      std::vector<int> layers;
      for (int l = p.first; l <= p.last; ++l)
        if (May(l) && (gap > n || (l - p.first + 1) % gap != 0)) layers.push_back(l);
      const double ms = ExtraForwardMsOf(c, p.first, layers);
      if ((!best || ms < best_ms) && Fits(layers)) best = std::move(layers), best_ms = ms;
    }
    return best;
  }

  // Every subset of the layers that may re-compute (at most kExhaustiveLayers of them): the
  // one with the least extra forward that fits, the first in subset order on ties.
  std::optional<std::vector<int>> Exhaustive() const {
    std::vector<int> may;
    for (int l = p.first; l <= p.last; ++l)
      if (May(l)) may.push_back(l);
    std::optional<std::vector<int>> best;
    double best_ms = 0;
    for (unsigned mask = 0; mask < (1u << may.size()); ++mask) {
      std::vector<int> layers;
      for (size_t i = 0; i < may.size(); ++i)
        if (mask >> i & 1) layers.push_back(may[i]);
      const double ms = ExtraForwardMsOf(c, p.first, layers);
      if ((!best || ms < best_ms) && Fits(layers)) best = std::move(layers), best_ms = ms;
    }
    return best;
  }

  // Drops the layers the stage fits without, the slowest first.
  void DropUnneeded(std::vector<int>& layers) const {
    std::vector<int> order = layers;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return c.forward_ms[a - p.first] > c.forward_ms[b - p.first];
    });
    for (int l : order)
      if (Fits(Without(layers, l))) layers = Without(layers, l);
  }

  // Swaps a layer for one whose forward is shorter while the stage fits; a bounded number
  // of passes, each strictly shortening the extra forward.
  void SwapForFaster(std::vector<int>& layers) const {
    for (int pass = 0; pass < 4 * (p.last - p.first + 1); ++pass) {
      bool swapped = false;
      for (size_t i = 0; i < layers.size() && !swapped; ++i) {
        const int out = layers[i];
        for (int in = p.first; in <= p.last && !swapped; ++in) {
          if (In(layers, in) || !May(in) ||
              !(c.forward_ms[in - p.first] < c.forward_ms[out - p.first]))
            continue;
          std::vector<int> next = With(Without(layers, out), in);
          if (Fits(next)) layers = std::move(next), swapped = true;
        }
      }
      if (!swapped) return;
      DropUnneeded(layers);
    }
  }
};

}  // namespace

std::optional<std::vector<int>> ChooseRecomputeLayers(const RecomputeProblem& p) {
  DAPPLE_CHECK(p.cost && p.first <= p.last && !p.devices.empty());
  Chooser chooser{p, CostsOfLayers(p)};
  std::vector<int> layers;
  if (chooser.Fits(layers)) return layers;
  int may = 0;
  for (int l = p.first; l <= p.last; ++l) may += chooser.May(l) ? 1 : 0;
  if (may <= kExhaustiveLayers) return chooser.Exhaustive();
  // The greedy and the evenly spaced segments, each polished: the one with the least extra
  // forward (the greedy may stall, or pick many small segments where a few long ones do).
  std::optional<std::vector<int>> best;
  double best_ms = 0;
  std::optional<std::vector<int>> starts[] = {std::nullopt, chooser.EvenlySpaced()};
  if (chooser.AddUntilFits(layers)) starts[0] = std::move(layers);
  for (std::optional<std::vector<int>>& start : starts) {
    if (!start) continue;
    chooser.DropUnneeded(*start);
    chooser.SwapForFaster(*start);
    const double ms = ExtraForwardMsOf(chooser.c, p.first, *start);
    if (!best || ms < best_ms) best = std::move(start), best_ms = ms;
  }
  return best;
}

std::optional<std::vector<int>> RecomputeMemo::Choose(const RecomputeProblem& p) {
  std::vector<std::pair<int, int>> held;
  for (const HeldMicroBatches& h : p.held) held.emplace_back(h.in_flight, h.rebuilt);
  std::vector<int> kinds;  // CostModel::DeviceKind: devices of one kind cost the same
  for (int d : p.devices) kinds.push_back(p.cost->DeviceKind(d));
  Key key{p.first,         p.last,  std::move(kinds), p.micro_batch,
          std::move(held), p.split, p.budget_bytes};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!cost_) {
      cost_ = p.cost;
      forward_timed_ = p.forward_timed;
    }
    DAPPLE_CHECK(p.cost == cost_ && p.forward_timed == forward_timed_,
                 "a re-computation memo serves one cost model and one forward_timed");
    if (auto it = known_.find(key); it != known_.end()) return it->second;
  }
  std::optional<std::vector<int>> chosen = ChooseRecomputeLayers(p);
  std::lock_guard<std::mutex> lock(mu_);
  return known_.try_emplace(std::move(key), std::move(chosen)).first->second;
}

void ChooseStageRecompute(StagePlan& st, const CostModel& cost, int micro_batch,
                          std::vector<HeldMicroBatches> held, bool split, double budget_bytes,
                          const std::vector<bool>& forward_timed, RecomputeMemo* memo) {
  RecomputeProblem p;
  p.cost = &cost;
  p.first = st.first_layer;
  p.last = st.last_layer;
  p.devices = st.devices;
  p.micro_batch = micro_batch;
  p.held = std::move(held);
  p.split = split;
  p.budget_bytes = budget_bytes;
  p.forward_timed = forward_timed;
  std::optional<std::vector<int>> layers = memo ? memo->Choose(p) : ChooseRecomputeLayers(p);
  int may = 0;
  for (int l = st.first_layer; l <= st.last_layer; ++l) may += forward_timed[l] ? 1 : 0;
  st.recompute_layers.clear();
  st.recompute = false;
  if (layers && !layers->empty() && static_cast<int>(layers->size()) < may)
    st.recompute_layers = std::move(*layers);
  else
    st.recompute = true;
}

}  // namespace dapple
