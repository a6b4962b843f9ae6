// FindScheduleError: static checks of each list, send/receive pairing, then a dry run of
// all lists together to find deadlocks (cf. torch.pipelining's schedule simulation).
#include <fmt/format.h>

#include <string>
#include <vector>

#include "dapple/schedule/schedule.h"

namespace dapple {
namespace {

constexpr int kNumOps = 10;

std::string At(int stage, int pc, const Instruction& in) {
  if (in.micro_batch >= 0)
    return fmt::format("stage {} pc {} {} (micro-batch {})", stage, pc, ToString(in),
                       in.micro_batch);
  return fmt::format("stage {} pc {} {}", stage, pc, ToString(in));
}

// Position of each (op, micro-batch) in one stage's list, -1 when absent.
struct StageIndex {
  std::vector<int> pos[kNumOps];
  int& operator()(Op op, int mb) { return pos[static_cast<int>(op)][mb]; }
};

// Structure of one list: micro-batches in range, communication only towards neighbours,
// no duplicates, AR at most once and STEP exactly once at the end. Fills `index`.
std::optional<std::string> CheckStage(const Schedule& s, int stage, StageIndex& index) {
  const int m = s.num_micro_batches;
  const std::vector<Instruction>& p = s.programs[stage];
  for (auto& v : index.pos) v.assign(m, -1);
  int ar = -1, step = -1;
  for (int pc = 0; pc < static_cast<int>(p.size()); ++pc) {
    const Instruction& in = p[pc];
    if (step >= 0) return At(stage, pc, in) + ": instruction after STEP";
    switch (in.op) {
      case Op::kAllReduceGrads:
        if (ar >= 0) return At(stage, pc, in) + ": duplicate AR";
        ar = pc;
        continue;
      case Op::kOptimizerStep:
        step = pc;
        continue;
      case Op::kRecvAct:
      case Op::kSendGrad:
        if (stage == 0) return At(stage, pc, in) + ": the first stage has no previous stage";
        break;
      case Op::kSendAct:
      case Op::kRecvGrad:
        if (stage == s.num_stages - 1)
          return At(stage, pc, in) + ": the last stage has no next stage";
        break;
      case Op::kForward:
      case Op::kBackward:
      case Op::kInputGrad:
      case Op::kWeightGrad:
        break;
    }
    if (in.micro_batch < 0 || in.micro_batch >= m)
      return fmt::format("{}: micro-batch out of range [0, {})", At(stage, pc, in), m);
    int& slot = index(in.op, in.micro_batch);
    if (slot >= 0) return fmt::format("{}: duplicate of pc {}", At(stage, pc, in), slot);
    slot = pc;
  }
  if (step < 0) return fmt::format("stage {}: missing STEP at the end", stage);
  // The allreduce sums the accumulated weight gradients: none may come after it.
  for (int pc = ar + 1; ar >= 0 && pc < step; ++pc)
    if (p[pc].op == Op::kBackward || p[pc].op == Op::kWeightGrad)
      return At(stage, pc, p[pc]) + fmt::format(": weight gradient after the AR at pc {}", ar);
  return std::nullopt;
}

// Order within one stage: F before its backward, which is either B or I then W (never
// both); a compute after the receive of its input; a send after the compute that produced it.
std::optional<std::string> CheckOrder(const Schedule& s, int stage, StageIndex& ix) {
  const bool first = stage == 0, last = stage == s.num_stages - 1;
  const std::vector<Instruction>& p = s.programs[stage];
  for (int mb = 0; mb < s.num_micro_batches; ++mb) {
    const int f = ix(Op::kForward, mb), full = ix(Op::kBackward, mb);
    const int in = ix(Op::kInputGrad, mb), w = ix(Op::kWeightGrad, mb);
    if (f < 0) return fmt::format("stage {}: micro-batch {} has no forward (F{})", stage, mb, mb);
    if (full >= 0 && (in >= 0 || w >= 0)) {
      const int split = in >= 0 ? in : w;
      return At(stage, split, p[split]) +
             fmt::format(": micro-batch {} also has B at pc {}", mb, full);
    }
    if (full < 0 && in < 0)
      return fmt::format("stage {}: micro-batch {} has no backward (B{} or I{})", stage, mb, mb,
                         mb);
    if (in >= 0 && w < 0)
      return fmt::format("stage {}: micro-batch {} has no weight gradient (W{} after I{})", stage,
                         mb, mb, mb);
    if (in < 0 && w >= 0)
      return At(stage, w, p[w]) +
             fmt::format(": weight gradient without its input gradient I{}", mb);
    if (w >= 0 && w < in)
      return At(stage, w, p[w]) + fmt::format(": weight gradient before its I (pc {})", in);
    const int b = full >= 0 ? full : in;  // what the previous stage waits for
    if (b < f) return At(stage, b, p[b]) + fmt::format(": backward before its forward (pc {})", f);
    if (!first && ix(Op::kRecvAct, mb) > f)
      return At(stage, f, p[f]) + ": forward before its activation is received";
    if (!last && ix(Op::kSendAct, mb) < f)
      return At(stage, ix(Op::kSendAct, mb), p[ix(Op::kSendAct, mb)]) +
             ": activation sent before its forward";
    if (!last && ix(Op::kRecvGrad, mb) > b)
      return At(stage, b, p[b]) + ": backward before its gradient is received";
    if (!first && ix(Op::kSendGrad, mb) < b)
      return At(stage, ix(Op::kSendGrad, mb), p[ix(Op::kSendGrad, mb)]) +
             ": gradient sent before its backward";
  }
  return std::nullopt;
}

// Every send on one side of boundary `b` (stages b, b+1) has its receive on the other.
std::optional<std::string> CheckPairs(const Schedule& s, int b, StageIndex& lo, StageIndex& hi) {
  for (int mb = 0; mb < s.num_micro_batches; ++mb) {
    const auto& pl = s.programs[b];
    const auto& ph = s.programs[b + 1];
    int sa = lo(Op::kSendAct, mb), ra = hi(Op::kRecvAct, mb);
    int sg = hi(Op::kSendGrad, mb), rg = lo(Op::kRecvGrad, mb);
    if (sa >= 0 && ra < 0)
      return At(b, sa, pl[sa]) + fmt::format(": unmatched send, no RA{} on stage {}", mb, b + 1);
    if (ra >= 0 && sa < 0)
      return At(b + 1, ra, ph[ra]) + fmt::format(": unmatched receive, no SA{} on stage {}", mb, b);
    if (sg >= 0 && rg < 0)
      return At(b + 1, sg, ph[sg]) + fmt::format(": unmatched send, no RG{} on stage {}", mb, b);
    if (rg >= 0 && sg < 0)
      return At(b, rg, pl[rg]) + fmt::format(": unmatched receive, no SG{} on stage {}", mb, b + 1);
  }
  return std::nullopt;
}

// Runs every list as far as it can (sends never block, a receive waits for its send);
// returns the blocked stages when some list cannot finish.
std::optional<std::string> DryRun(const Schedule& s) {
  const int n = s.num_stages, m = s.num_micro_batches;
  std::vector<int> pc(n, 0);
  // sent[b][mb]: bit 0 activation of mb sent across boundary b, bit 1 its gradient.
  std::vector<std::vector<unsigned char>> sent(n, std::vector<unsigned char>(m, 0));
  bool progress = true;
  while (progress) {
    progress = false;
    for (int st = 0; st < n; ++st) {
      const auto& p = s.programs[st];
      while (pc[st] < static_cast<int>(p.size())) {
        const Instruction& in = p[pc[st]];
        if (in.op == Op::kRecvAct && !(sent[st - 1][in.micro_batch] & 1)) break;
        if (in.op == Op::kRecvGrad && !(sent[st][in.micro_batch] & 2)) break;
        if (in.op == Op::kSendAct) sent[st][in.micro_batch] |= 1;
        if (in.op == Op::kSendGrad) sent[st - 1][in.micro_batch] |= 2;
        ++pc[st];
        progress = true;
      }
    }
  }
  std::string blocked;
  for (int st = 0; st < n; ++st) {
    if (pc[st] == static_cast<int>(s.programs[st].size())) continue;
    const Instruction& in = s.programs[st][pc[st]];
    int from = in.op == Op::kRecvAct ? st - 1 : st + 1;
    blocked += fmt::format("{}{} waits for stage {}", blocked.empty() ? "" : "; ",
                           At(st, pc[st], in), from);
  }
  if (blocked.empty()) return std::nullopt;
  return "deadlock: " + blocked;
}

}  // namespace

std::optional<std::string> FindScheduleError(const Schedule& s) {
  if (s.num_stages <= 0 || static_cast<int>(s.programs.size()) != s.num_stages)
    return fmt::format("schedule has {} stages but {} programs", s.num_stages, s.programs.size());
  if (s.num_micro_batches <= 0)
    return fmt::format("schedule has {} micro-batches", s.num_micro_batches);
  std::vector<StageIndex> index(s.num_stages);
  for (int st = 0; st < s.num_stages; ++st)
    if (auto e = CheckStage(s, st, index[st])) return e;
  for (int b = 0; b + 1 < s.num_stages; ++b)
    if (auto e = CheckPairs(s, b, index[b], index[b + 1])) return e;
  for (int st = 0; st < s.num_stages; ++st)
    if (auto e = CheckOrder(s, st, index[st])) return e;
  return DryRun(s);
}

}  // namespace dapple
