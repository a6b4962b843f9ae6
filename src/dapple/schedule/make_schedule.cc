// The schedule generators of docs/design.md section 3. Every family is "K_s forwards, then one
// backward and one forward alternately until the forwards run out, then the remaining
// backwards"; only the warm-up depth K_s differs. GPipe is the case K_s = M. ZB-H1 splits
// the backward (Note [ZB-H1]).
#include <algorithm>
#include <vector>

#include "dapple/common/error.h"
#include "dapple/schedule/interleaved.h"
#include "dapple/schedule/schedule.h"
#include "dapple/schedule/shape_memo.h"
#include "dapple/schedule/v_shape.h"

namespace dapple {

// Note [Warmup depth]: K_s = S - s lets the last stage start its first backward as soon
// as its first forward ends (policy A, 1F1B); K_s = 2(S - s) - 1 keeps enough forwards in
// flight to cover a round trip of transfers between neighbours (policy B). Both are capped
// at M. GPipe runs all M forwards first (fill-drain) and then B0..B(M-1), oldest first.
int WarmupDepth(ScheduleKind kind, int stage, int num_stages, int num_micro_batches) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return num_micro_batches;
    case ScheduleKind::kDappleA:
    case ScheduleKind::kZbH1:
      return std::min(num_stages - stage, num_micro_batches);
    case ScheduleKind::kZbV:  // forwards of chunk 0 (Note [ZB-V])
    case ScheduleKind::kZbH2:
    case ScheduleKind::kDappleB:
    case ScheduleKind::kInterleaved:  // with one chunk; Note [Interleaved 1F1B] for more
      return std::min(2 * (num_stages - stage) - 1, num_micro_batches);
    case ScheduleKind::kVHalf:  // forwards of both chunks (Note [V-Half and V-Min])
    case ScheduleKind::kVMin:
      return internal::VShapeWarmup(kind, stage, num_stages, num_micro_batches);
  }
  return num_micro_batches;
}

namespace {

// Note [ZB-H1]: the backward of each micro-batch is split into I (the input gradient, what
// the previous stage waits for) and W (the weight gradients, what nobody waits for). Stage
// s runs dapple-a's order of forwards and input gradients (K_s = min(S - s, M) forwards,
// then one I and one F alternately, then the remaining I's) and keeps up to s weight
// gradients deferred: after each I, if more than s of its W's are pending, it runs the
// oldest one (before the next F). The W's left at the end run last. With F = I = W = 1 and
// free transfers every stage idles S - 1 units per iteration, 3M + S - 1 in all, against
// 3(S - 1) of 3M + 3(S - 1) for dapple-a with B = I + W: the paper's one third. The last
// stage has the most W's deferred because the critical path of the drain is the chain of
// I's from the last stage to the first: running them back to back, and the W's after,
// shortens it by S - 1 units. The price is memory: a micro-batch's activations live from
// its F to its W, so every stage holds up to min(S, M) micro-batches at its peak, which is
// dapple-a's peak on stage 0 (and the largest of dapple-a's stages), not stage s's S - s.
// Holding only S - s on the last stages cannot reach the one third: with S = 2 the last
// stage would run F I W strictly in turn and the iteration would take 3M + 2.
//
// Note [ZB-H2]: the same with dapple-b's warm-up, K_s = min(2(S - s) - 1, M), and up to 2s
// weight gradients deferred on stage s. With F = I = W = 1 and free transfers stage s is busy
// from s to 3M + s without a gap: a parallelogram. Its first iteration from a cold start
// takes zb-h1's 3M + S - 1, but as stage s may start its next forward once its own update
// ended (at 3M + s), consecutive iterations follow every 3M units: no bubble in steady state
// (tests/sim/steady_state_test.cc). Every stage holds up to min(2S - 1, M) micro-batches.
void AppendZeroBubble(ScheduleKind kind, int stage, int num_stages, int m,
                      std::vector<Instruction>& p) {
  const int k = WarmupDepth(kind, stage, num_stages, m);
  const int deferred = kind == ScheduleKind::kZbH2 ? 2 * stage : stage;
  int f = 0, i = 0, w = 0;
  auto weight_if_due = [&] {
    if (i - w > deferred) p.push_back({Op::kWeightGrad, w++});
  };
  while (f < k) p.push_back({Op::kForward, f++});
  while (f < m) {
    p.push_back({Op::kInputGrad, i++});
    weight_if_due();
    p.push_back({Op::kForward, f++});
  }
  while (i < m) {
    p.push_back({Op::kInputGrad, i++});
    weight_if_due();
  }
  while (w < m) p.push_back({Op::kWeightGrad, w++});
}

}  // namespace

namespace {

// zb-h2's peak of micro-batches in flight (F to W) on `stage` of (S, M), counted on the lists
// of every stage once per process: the planner asks it for every stage it evaluates.
int ZbH2Peak(int stage, int num_stages, int num_micro_batches) {
  static ShapeMemo<std::vector<int>> memo;
  auto count = [&] {
    std::vector<int> peaks;
    for (int s = 0; s < num_stages; ++s) {
      std::vector<Instruction> p;
      AppendZeroBubble(ScheduleKind::kZbH2, s, num_stages, num_micro_batches, p);
      int in_flight = 0, peak = 0;
      for (const Instruction& in : p) {
        if (in.op == Op::kForward) peak = std::max(peak, ++in_flight);
        if (in.op == Op::kWeightGrad) --in_flight;
      }
      peaks.push_back(peak);
    }
    return peaks;
  };
  return memo.Get(ScheduleKind::kZbH2, num_stages, num_micro_batches, count)->at(stage);
}

}  // namespace

int PeakInFlight(ScheduleKind kind, int stage, int num_stages, int num_micro_batches,
                 int num_chunks) {
  switch (kind) {
    case ScheduleKind::kInterleaved:
      return internal::InterleavedWarmup(stage, num_stages, num_micro_batches, num_chunks);
    case ScheduleKind::kGPipe:
    case ScheduleKind::kDappleA:
    case ScheduleKind::kDappleB:
      return WarmupDepth(kind, stage, num_stages, num_micro_batches);
    case ScheduleKind::kZbH1:  // K_s forwards, then stage s more while s W's are deferred
      return std::min(num_stages, num_micro_batches);
    case ScheduleKind::kZbH2:  // counted on the list (Note [ZB-H2])
      return ZbH2Peak(stage, num_stages, num_micro_batches);
    case ScheduleKind::kZbV:
    case ScheduleKind::kVHalf:
    case ScheduleKind::kVMin:
      return internal::VShapePeakInFlight(kind, stage, num_stages, num_micro_batches);
  }
  return num_micro_batches;
}

Schedule MakeSchedule(ScheduleKind kind, int num_stages, int num_micro_batches, int num_chunks) {
  if (num_stages <= 0)
    ThrowInput("schedule {}: number of stages must be positive, got {}", ToString(kind),
               num_stages);
  if (num_micro_batches <= 0)
    ThrowInput("schedule {}: number of micro-batches must be positive, got {}", ToString(kind),
               num_micro_batches);
  CheckChunks(kind, num_stages, num_micro_batches, num_chunks);
  Schedule s;
  s.num_stages = num_stages;
  s.num_micro_batches = num_micro_batches;
  s.num_chunks = num_chunks;
  s.v_shape = VShaped(kind);
  s.programs.resize(num_stages);
  const int m = num_micro_batches;
  if (kind == ScheduleKind::kVHalf || kind == ScheduleKind::kVMin) {
    s.programs = *internal::ControlledVLists(kind, num_stages, m);
    return s;
  }
  for (int stage = 0; stage < num_stages; ++stage) {
    std::vector<Instruction>& p = s.programs[stage];
    p.reserve(3 * m * num_chunks);
    if (kind == ScheduleKind::kInterleaved) {
      internal::AppendInterleaved(stage, num_stages, m, num_chunks, p);
      continue;
    }
    if (kind == ScheduleKind::kZbV) {
      internal::AppendZbV(stage, num_stages, m, p);
      continue;
    }
    if (SplitsBackward(kind)) {
      AppendZeroBubble(kind, stage, num_stages, m, p);
      continue;
    }
    const int k = WarmupDepth(kind, stage, num_stages, m);
    int f = 0, b = 0;
    while (f < k) p.push_back({Op::kForward, f++});
    while (f < m) {
      p.push_back({Op::kBackward, b++});
      p.push_back({Op::kForward, f++});
    }
    while (b < m) p.push_back({Op::kBackward, b++});
  }
  return s;
}

}  // namespace dapple
