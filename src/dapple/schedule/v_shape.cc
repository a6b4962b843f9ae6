// The V-shape schedules (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS
// 2024; docs/schedules.md, "ZB-V").
#include "dapple/schedule/v_shape.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "dapple/schedule/shape_memo.h"

namespace dapple::internal {

// Note [ZB-V]
// Every stage (device group) g holds two chunks in a V (Note [V placement]): chunk 0 is
// virtual stage g, chunk 1 virtual stage 2S - 1 - g. The backward is split into I and W as
// in zb-h1 (Note [ZB-H1]). Stage g's list, after torch.distributed.pipelining's
// ScheduleZBVZeroBubble (the construction of the paper's figure), for n = max(2S - 1, M)
// micro-batches:
// * warm-up: 2(S - g) - 1 forwards of chunk 0; then g times a forward of chunk 1 and one of
//   chunk 0; then S - g times F I W of chunk 1;
// * steady state, while forwards are left: F I W of chunk 0 (no F once chunk 0's run out),
//   then F I W of chunk 1;
// * cool-down: g times I of chunk 0 and I of chunk 1; S - g times I and W of chunk 0;
//   then the deferred W's of chunk 1 and of chunk 0.
// Micro-batches from M to n - 1 only pad the pattern when M < 2S - 1: their instructions
// are left out. With F = I = W = t per chunk and free transfers (M >= 2S - 1) no stage idles
// once its first forward started: stage S - 1 starts after the S - 1 forwards of
// micro-batch 0 down chunk 0, so the iteration takes 6Mt + (S - 1)t, the work of two chunks
// per micro-batch plus the fill of one chunk, the least any schedule can take on this V
// (tests/sim/v_shape_test.cc). Every stage then holds 2S chunk-micro-batches at its peak
// (2S - 1 of chunk 0 and one of chunk 1 at the end of the warm-up): S micro-batches of its
// chunk pair, 1F1B's peak when the chunks are halves of its stages.
void AppendZbV(int stage, int num_stages, int num_micro_batches, std::vector<Instruction>& p) {
  const int S = num_stages, g = stage, n = std::max(2 * S - 1, num_micro_batches);
  int f[2] = {0, 0}, i[2] = {0, 0}, w[2] = {0, 0};
  auto emit = [&](Op op, int chunk, int& count) {
    if (count < num_micro_batches) p.push_back({op, count, chunk});
    ++count;
  };
  auto fiw = [&](int c, bool forward) {
    if (forward) emit(Op::kForward, c, f[c]);
    emit(Op::kInputGrad, c, i[c]);
    emit(Op::kWeightGrad, c, w[c]);
  };
  for (int k = 0; k < 2 * (S - g) - 1; ++k) emit(Op::kForward, 0, f[0]);
  for (int k = 0; k < g; ++k) {
    emit(Op::kForward, 1, f[1]);
    emit(Op::kForward, 0, f[0]);
  }
  for (int k = 0; k < S - g; ++k) fiw(1, true);
  while (f[1] < f[0] || f[0] < n) {
    fiw(0, f[0] < n);
    fiw(1, true);
  }
  for (int k = 0; k < g; ++k) {
    emit(Op::kInputGrad, 0, i[0]);
    emit(Op::kInputGrad, 1, i[1]);
  }
  for (int k = 0; k < S - g; ++k) {
    emit(Op::kInputGrad, 0, i[0]);
    emit(Op::kWeightGrad, 0, w[0]);
  }
  while (w[1] < n) emit(Op::kWeightGrad, 1, w[1]);
  while (w[0] < n) emit(Op::kWeightGrad, 0, w[0]);
}

// Note [V lists made once]
// The planner asks the peaks of v-half and v-min (FactsOf below) for every stage it evaluates,
// and simulates some of the same shapes after (MakeSchedule): the squeeze runs once for both
// while the lists are kept. They are kept up to kKeptInstructions in all (a few MB; a shape
// of S stages and M micro-batches holds 6SM instructions), and all are dropped when a new
// one would pass that: the lists are a function of (kind, S, M), so dropping them costs
// time only.
std::shared_ptr<const std::vector<std::vector<Instruction>>> ControlledVLists(
    ScheduleKind kind, int num_stages, int num_micro_batches) {
  using Lists = std::vector<std::vector<Instruction>>;
  constexpr size_t kKeptInstructions = size_t{1} << 20;
  static std::mutex mu;
  static std::map<std::tuple<ScheduleKind, int, int>, std::shared_ptr<const Lists>> known;
  static size_t kept = 0;  // instructions in `known`
  const auto key = std::tuple{kind, num_stages, num_micro_batches};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  auto lists = std::make_shared<const Lists>(MakeControlledV(kind, num_stages, num_micro_batches));
  size_t size = 0;
  for (const std::vector<Instruction>& p : *lists) size += p.size();
  std::lock_guard<std::mutex> lock(mu);
  if (kept + size > kKeptInstructions) {
    known.clear();
    kept = 0;
  }
  auto [it, fresh] = known.try_emplace(key, std::move(lists));
  if (fresh) kept += size;
  return it->second;
}

namespace {

// Per stage of a V-shape kind: the peak of chunk-micro-batches (F to W) and the forwards that
// open its list.
struct VShapeFacts {
  std::vector<int> peak, warmup;
};

// The facts of (kind, S, M), counted on the lists once per process: v-half and v-min make
// every stage at once (the squeeze couples them), and the planner asks each stage of many
// shapes, from threads that live for one search each (a memo per thread made the lists
// again on each).
std::shared_ptr<const VShapeFacts> FactsOf(ScheduleKind kind, int num_stages,
                                           int num_micro_batches) {
  static ShapeMemo<VShapeFacts> memo;
  return memo.Get(kind, num_stages, num_micro_batches, [&] {
    std::shared_ptr<const std::vector<std::vector<Instruction>>> lists;
    if (kind == ScheduleKind::kZbV) {
      auto made = std::make_shared<std::vector<std::vector<Instruction>>>(num_stages);
      for (int g = 0; g < num_stages; ++g) AppendZbV(g, num_stages, num_micro_batches, (*made)[g]);
      lists = std::move(made);
    } else {
      lists = ControlledVLists(kind, num_stages, num_micro_batches);
    }
    VShapeFacts f;
    for (const std::vector<Instruction>& p : *lists) {
      int in_flight = 0, peak = 0, warmup = 0;
      bool opening = true;
      for (const Instruction& in : p) {
        opening = opening && in.op == Op::kForward;
        if (opening) ++warmup;
        if (in.op == Op::kForward) peak = std::max(peak, ++in_flight);
        if (in.op == Op::kWeightGrad) --in_flight;
      }
      f.peak.push_back(peak);
      f.warmup.push_back(warmup);
    }
    return f;
  });
}

}  // namespace

int VShapePeakInFlight(ScheduleKind kind, int stage, int num_stages, int num_micro_batches) {
  return FactsOf(kind, num_stages, num_micro_batches)->peak[stage];
}

int VShapeWarmup(ScheduleKind kind, int stage, int num_stages, int num_micro_batches) {
  return FactsOf(kind, num_stages, num_micro_batches)->warmup[stage];
}

}  // namespace dapple::internal
