// The schedule generators of docs/design.md section 3. Every family is "K_s forwards, then one
// backward and one forward alternately until the forwards run out, then the remaining
// backwards"; only the warm-up depth K_s differs. GPipe is the case K_s = M.
#include <algorithm>

#include "dapple/common/error.h"
#include "dapple/schedule/schedule.h"

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
      return std::min(num_stages - stage, num_micro_batches);
    case ScheduleKind::kDappleB:
      return std::min(2 * (num_stages - stage) - 1, num_micro_batches);
  }
  return num_micro_batches;
}

Schedule MakeSchedule(ScheduleKind kind, int num_stages, int num_micro_batches) {
  if (num_stages <= 0)
    ThrowInput("schedule {}: number of stages must be positive, got {}", ToString(kind),
               num_stages);
  if (num_micro_batches <= 0)
    ThrowInput("schedule {}: number of micro-batches must be positive, got {}", ToString(kind),
               num_micro_batches);
  Schedule s;
  s.num_stages = num_stages;
  s.num_micro_batches = num_micro_batches;
  s.programs.resize(num_stages);
  const int m = num_micro_batches;
  for (int stage = 0; stage < num_stages; ++stage) {
    const int k = WarmupDepth(kind, stage, num_stages, m);
    std::vector<Instruction>& p = s.programs[stage];
    p.reserve(2 * m);
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
