// V-Half and V-Min (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS 2024;
// docs/schedules.md, "V-Half and V-Min").
#include <algorithm>
#include <array>
#include <deque>
#include <optional>

#include "dapple/common/error.h"
#include "dapple/schedule/v_shape.h"

namespace dapple::internal {

// Note [V-Half and V-Min]
// Same V as ZB-V (Note [V placement]): stage g runs chunk 0 (virtual stage g) and chunk 1
// (virtual stage 2S - 1 - g), the backward split into I and W. Time is counted in units t
// with F = I = W = t per chunk, so a micro-batch is 6 units of work on every stage.
//
// Building block. Micro-batch n's four passes on stage g run at fixed offsets plus 6n:
// F of chunk 0 going down the stages, F of chunk 1 coming back up, I of chunk 1 going down,
// I of chunk 0 coming back up. A chunk's activations live from its F to its W, so with one
// micro-batch entering every 6 units a stage holds about (L0 + L1) / 6 chunk-micro-batches,
// L_c its chunk's lifespan. The offsets set the lifespans:
// * v-min: every pass one unit after the one it depends on: F0 = g, F1 = 2S - 1 - g,
//   I1 = 2S + d + g, I0 = 4S - 1 + d - g, so L0 + L1 = 4S + 2d: about 2S/3 chunk-micro-batches,
//   a third of ZB-V's 2S. d = 2 when 3 divides S, else 0.
// * v-half: the passes going down (F0 and I1) two units apart per stage: F0 = 2g,
//   F1 = 3S - 2 - g, I1 = 3S - 1 + d + 2g, I0 = 6S - 2 + d - g, so L0 + L1 = 6S - 1 + 2d:
//   about S chunk-micro-batches, half of ZB-V's. d = 3 when S is even, else 0.
// d keeps the four offsets of every stage distinct modulo 6 (two equal residues would put
// two passes in one unit); the two residues left are where W's go.
//
// Squeeze. The block leaves the warm-up and cool-down sparse. Taking the passes in order of
// their block times (stages in order on ties), each moves to the earliest free unit after
// what it depends on (its neighbour's pass, and its own stage's pass of the previous
// micro-batch, which keeps every pass in micro-batch order) provided its stage's peak stays
// within the cap: the block's largest peak over all stages.
//
// W's. A unit without F or I runs the oldest W waiting (in the order of their I's); the W's
// left at the end run last. A stage's list is its units in time order, so its memory is
// what the squeeze counted: the peak is the cap, measured 2 * ((S + 2) / 2) (v-half) and
// 2 * ((S + 4) / 3) (v-min) chunk-micro-batches once M >= 2S, i.e. (S + 2) // 2 and
// (S + 4) // 3 micro-batches of a chunk pair, the paper's figures. With free transfers and
// F = I = W = t the iteration then takes 6Mt + bubble (tests/sim/v_shape_test.cc, S = 2..8,
// M = 2S..4S), bubble = max(S - 1, 6 floor((S - 1) / 2) - 1)t for v-half and
// (4S - 7 + 2 [S mod 3 = 1])t for v-min: under the paper's S/2 and 2S/3 micro-batches (3St and
// 4St), against ZB-V's (S - 1)t at twice v-half's memory.
namespace {

enum Pass { kF0, kF1, kI1, kI0, kNumPasses };
constexpr int kChunkOf[kNumPasses] = {0, 1, 1, 0};
constexpr int kPeriod = 6;

struct Unit {
  int pass = -1;  // -1: free (a W runs here if one waits)
  int micro_batch = 0;
};

std::array<int, kNumPasses> BlockOffsets(ScheduleKind kind, int S, int g) {
  if (kind == ScheduleKind::kVMin) {
    const int d = S % 3 == 0 ? 2 : 0;
    return {g, 2 * S - 1 - g, 2 * S + d + g, 4 * S - 1 + d - g};
  }
  const int d = S % 2 == 0 ? 3 : 0;
  return {2 * g, 3 * S - 2 - g, 3 * S - 1 + d + 2 * g, 6 * S - 2 + d - g};
}

// The units of one stage, with the memory it holds before each unit (W's filling the free
// units): held[t] chunk-micro-batches, waiting[t] W's due, kept by Recount and Move.
struct StageUnits {
  std::vector<Unit> units;
  std::vector<int> held, waiting;
  int peak = 0;
  // MoveFits' count: the states after unit t with the move, for t from its `to` on.
  std::vector<int> moved_held, moved_waiting;

  // One unit's effect on (held, waiting).
  static void Step(const Unit& u, int& held, int& waiting) {
    if (u.pass == kF0 || u.pass == kF1) {
      ++held;
    } else if (u.pass >= 0) {
      ++waiting;
    } else if (waiting > 0) {
      --waiting;
      --held;
    }
  }
  void Recount() {
    held.assign(units.size() + 1, 0);
    waiting.assign(units.size() + 1, 0);
    moved_held.assign(units.size(), 0);
    moved_waiting.assign(units.size(), 0);
    int h = 0, w = 0;
    peak = 0;
    for (size_t t = 0; t < units.size(); ++t) {
      Step(units[t], h, w);
      held[t + 1] = h;
      waiting[t + 1] = w;
      peak = std::max(peak, h);
    }
  }
  // Whether moving the pass at unit `from` to the free unit `to` < `from` keeps the peak within
  // `cap`: counts from `to` until the state meets the stored one again after `from`, and
  // returns where it did (the units whose state the move changes end there), else nullopt.
  // The states it counted are left in moved_held and moved_waiting for Move.
  std::optional<int> MoveFits(int to, int from, int cap) {
    int h = held[to], w = waiting[to];
    const int n = static_cast<int>(units.size());
    auto step = [&](int t, const Unit& u) {
      Step(u, h, w);
      moved_held[t] = h;
      moved_waiting[t] = w;
      return h <= cap;
    };
    if (!step(to, units[from])) return std::nullopt;
    for (int t = to + 1; t < from; ++t)
      if (!step(t, units[t])) return std::nullopt;
    for (int t = from; t < n; ++t) {
      if (!step(t, t == from ? Unit{} : units[t])) return std::nullopt;
      if (h == held[t + 1] && w == waiting[t + 1]) return t + 1;
    }
    return n;
  }
  // Moves the pass at `from` to `to` and keeps the states MoveFits(to, from, ..) counted, up
  // to the `end` it returned.
  void Move(int to, int from, int end) {
    units[to] = units[from];
    units[from] = Unit{};
    std::copy(moved_held.begin() + to, moved_held.begin() + end, held.begin() + to + 1);
    std::copy(moved_waiting.begin() + to, moved_waiting.begin() + end, waiting.begin() + to + 1);
  }
};

// The earliest unit pass `p` of micro-batch n on stage g may run at: after the passes it
// depends on (at[stage][pass][mb] holds their units).
int EarliestUnit(const std::vector<std::array<std::vector<int>, kNumPasses>>& at, int S, int g,
                 int p, int n) {
  int after = -1;
  auto dep = [&](int stage, int pass) { after = std::max(after, at[stage][pass][n]); };
  if (n > 0) after = at[g][p][n - 1];
  switch (p) {
    case kF0:
      if (g > 0) dep(g - 1, kF0);
      break;
    case kF1:
      g == S - 1 ? dep(g, kF0) : dep(g + 1, kF1);
      break;
    case kI1:
      dep(g, kF1);
      if (g > 0) dep(g - 1, kI1);
      break;
    case kI0:
      dep(g, kF0);
      g == S - 1 ? dep(g, kI1) : dep(g + 1, kI0);
      break;
  }
  return after + 1;
}

std::vector<Instruction> StageList(const StageUnits& s) {
  std::vector<Instruction> p;
  std::deque<Instruction> due;
  for (const Unit& u : s.units) {
    if (u.pass < 0) {
      if (!due.empty()) p.push_back(due.front()), due.pop_front();
      continue;
    }
    const int chunk = kChunkOf[u.pass];
    const bool forward = u.pass == kF0 || u.pass == kF1;
    p.push_back({forward ? Op::kForward : Op::kInputGrad, u.micro_batch, chunk});
    if (!forward) due.push_back({Op::kWeightGrad, u.micro_batch, chunk});
  }
  p.insert(p.end(), due.begin(), due.end());
  return p;
}

}  // namespace

// Note [Squeeze order]
// The squeeze takes the passes by block time, stages in order on ties. No two passes share a
// unit of one stage (the offsets of a stage are distinct modulo 6, checked: every pass is
// found), so that order is unique, and a scan of the units, time by time and stage by stage,
// finds it in O(S x units), cheaper than a sort by (time, stage).
std::vector<BlockPass> BlockPasses(ScheduleKind kind, int S, int M) {
  std::vector<std::array<int, kNumPasses>> offset(S);
  std::vector<std::array<int, kPeriod>> pass_at(S);  // [g][t mod 6]: the pass there, or -1
  int length = 0;
  for (int g = 0; g < S; ++g) {
    offset[g] = BlockOffsets(kind, S, g);
    pass_at[g].fill(-1);
    for (int p = 0; p < kNumPasses; ++p) {
      pass_at[g][offset[g][p] % kPeriod] = p;
      length = std::max(length, offset[g][p] + kPeriod * (M - 1) + 1);
    }
  }
  std::vector<BlockPass> order;
  order.reserve(static_cast<size_t>(kNumPasses) * S * M);
  for (int t = 0; t < length; ++t) {
    for (int g = 0; g < S; ++g) {
      const int p = pass_at[g][t % kPeriod];
      if (p < 0 || t < offset[g][p]) continue;
      const int n = (t - offset[g][p]) / kPeriod;
      if (n < M) order.push_back({t, g, p, n});
    }
  }
  DAPPLE_CHECK(order.size() == static_cast<size_t>(kNumPasses) * S * M,
               "the block's passes share a unit");
  return order;
}

std::vector<std::vector<Instruction>> MakeControlledV(ScheduleKind kind, int S, int M) {
  DAPPLE_CHECK(kind == ScheduleKind::kVHalf || kind == ScheduleKind::kVMin, "not v-half/v-min");
  std::vector<StageUnits> stages(S);
  std::vector<std::array<std::vector<int>, kNumPasses>> at(S);
  for (int g = 0; g < S; ++g) {
    const std::array<int, kNumPasses> offset = BlockOffsets(kind, S, g);
    const int length = *std::max_element(offset.begin(), offset.end()) + kPeriod * (M - 1) + 1;
    stages[g].units.resize(length);
    for (std::vector<int>& a : at[g]) a.resize(M);
  }
  const std::vector<BlockPass> order = BlockPasses(kind, S, M);
  for (const BlockPass& x : order) {
    stages[x.stage].units[x.time] = {x.pass, x.micro_batch};
    at[x.stage][x.pass][x.micro_batch] = x.time;
  }
  for (StageUnits& s : stages) s.Recount();
  int cap = 0;
  for (const StageUnits& s : stages) cap = std::max(cap, s.peak);
  for (const BlockPass& x : order) {
    StageUnits& s = stages[x.stage];
    const int from = at[x.stage][x.pass][x.micro_batch];
    for (int to = EarliestUnit(at, S, x.stage, x.pass, x.micro_batch); to < from; ++to) {
      if (s.units[to].pass >= 0) continue;
      const std::optional<int> end = s.MoveFits(to, from, cap);
      if (!end) continue;
      s.Move(to, from, *end);
      at[x.stage][x.pass][x.micro_batch] = to;
      break;
    }
  }
  std::vector<std::vector<Instruction>> lists;
  for (const StageUnits& s : stages) lists.push_back(StageList(s));
  return lists;
}

}  // namespace dapple::internal
