// FindScheduleError: static checks of each list, send/receive pairing, then a dry run of
// all lists together to find deadlocks (cf. torch.pipelining's schedule simulation).
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dapple/schedule/schedule.h"

namespace dapple {
namespace {

constexpr int kNumOps = 10;

std::string At(int stage, int pc, const Instruction& in) {
  if (in.micro_batch >= 0 && in.chunk != 0)
    return fmt::format("stage {} pc {} {} (micro-batch {}, chunk {})", stage, pc, ToString(in),
                       in.micro_batch, in.chunk);
  if (in.micro_batch >= 0)
    return fmt::format("stage {} pc {} {} (micro-batch {})", stage, pc, ToString(in),
                       in.micro_batch);
  return fmt::format("stage {} pc {} {}", stage, pc, ToString(in));
}

// Position of each (op, chunk, micro-batch) in one stage's list, -1 when absent.
struct StageIndex {
  int m = 0;
  std::vector<int> pos[kNumOps];
  int& operator()(Op op, int mb, int chunk = 0) {
    return pos[static_cast<int>(op)][chunk * m + mb];
  }
};

// Structure of one list: micro-batches in range, communication only towards neighbours,
// no duplicates, AR at most once and STEP exactly once at the end. Fills `index`.
std::optional<std::string> CheckStage(const Schedule& s, int stage, StageIndex& index) {
  const int m = s.num_micro_batches, last = s.num_virtual_stages() - 1;
  const std::vector<Instruction>& p = s.programs[stage];
  index.m = m;
  for (auto& v : index.pos) v.assign(static_cast<size_t>(m) * s.num_chunks, -1);
  int ar = -1, step = -1;
  for (int pc = 0; pc < static_cast<int>(p.size()); ++pc) {
    const Instruction& in = p[pc];
    if (step >= 0) return At(stage, pc, in) + ": instruction after STEP";
    if (in.chunk < 0 || in.chunk >= s.num_chunks)
      return fmt::format("{}: chunk out of range [0, {})", At(stage, pc, in), s.num_chunks);
    const int vs = s.VirtualStage(stage, in.chunk);
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
        if (vs == 0) return At(stage, pc, in) + ": the first stage has no previous stage";
        break;
      case Op::kSendAct:
      case Op::kRecvGrad:
        if (vs == last) return At(stage, pc, in) + ": the last stage has no next stage";
        break;
      case Op::kForward:
      case Op::kBackward:
      case Op::kInputGrad:
      case Op::kWeightGrad:
        break;
    }
    if (in.micro_batch < 0 || in.micro_batch >= m)
      return fmt::format("{}: micro-batch out of range [0, {})", At(stage, pc, in), m);
    int& slot = index(in.op, in.micro_batch, in.chunk);
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
// both); a compute after the receive of its input; a send after the compute that produced it;
// with chunks, a micro-batch's forwards in chunk order and its backwards in reverse.
std::optional<std::string> CheckOrder(const Schedule& s, int stage, StageIndex& ix) {
  const int last_vs = s.num_virtual_stages() - 1;
  const std::vector<Instruction>& p = s.programs[stage];
  for (int c = 0; c < s.num_chunks; ++c) {
    const int vs = s.VirtualStage(stage, c);
    const bool first = vs == 0, last = vs == last_vs;
    const std::string of = c == 0 ? "" : fmt::format(" on chunk {}", c);
    const std::string suffix = c == 0 ? "" : fmt::format("c{}", c);
    for (int mb = 0; mb < s.num_micro_batches; ++mb) {
      const int f = ix(Op::kForward, mb, c), full = ix(Op::kBackward, mb, c);
      const int in = ix(Op::kInputGrad, mb, c), w = ix(Op::kWeightGrad, mb, c);
      if (f < 0)
        return fmt::format("stage {}: micro-batch {}{} has no forward (F{}{})", stage, mb, of, mb,
                           suffix);
      if (full >= 0 && (in >= 0 || w >= 0)) {
        const int split = in >= 0 ? in : w;
        return At(stage, split, p[split]) +
               fmt::format(": micro-batch {} also has B at pc {}", mb, full);
      }
      if (full < 0 && in < 0)
        return fmt::format("stage {}: micro-batch {}{} has no backward (B{}{} or I{}{})", stage, mb,
                           of, mb, suffix, mb, suffix);
      if (in >= 0 && w < 0)
        return fmt::format("stage {}: micro-batch {}{} has no weight gradient (W{}{} after I{}{})",
                           stage, mb, of, mb, suffix, mb, suffix);
      if (in < 0 && w >= 0)
        return At(stage, w, p[w]) +
               fmt::format(": weight gradient without its input gradient I{}{}", mb, suffix);
      if (w >= 0 && w < in)
        return At(stage, w, p[w]) + fmt::format(": weight gradient before its I (pc {})", in);
      const int b = full >= 0 ? full : in;  // what the previous stage waits for
      if (b < f)
        return At(stage, b, p[b]) + fmt::format(": backward before its forward (pc {})", f);
      if (!first && ix(Op::kRecvAct, mb, c) > f)
        return At(stage, f, p[f]) + ": forward before its activation is received";
      const int sa = ix(Op::kSendAct, mb, c), rg = ix(Op::kRecvGrad, mb, c);
      const int sg = ix(Op::kSendGrad, mb, c);
      if (!last && sa < f) return At(stage, sa, p[sa]) + ": activation sent before its forward";
      if (!last && rg > b) return At(stage, b, p[b]) + ": backward before its gradient is received";
      if (!first && sg < b) return At(stage, sg, p[sg]) + ": gradient sent before its backward";
      if (c == 0) continue;
      // The chunk below on this stage: its forward first, its backward last.
      const int prev_f = ix(Op::kForward, mb, c - 1);
      const int prev_b = std::max(ix(Op::kBackward, mb, c - 1), ix(Op::kInputGrad, mb, c - 1));
      if (f < prev_f)
        return At(stage, f, p[f]) +
               fmt::format(": forward before chunk {}'s forward of micro-batch {} (pc {})", c - 1,
                           mb, prev_f);
      if (prev_b >= 0 && prev_b < b)
        return At(stage, prev_b, p[prev_b]) +
               fmt::format(": backward before chunk {}'s backward of micro-batch {} (pc {})", c, mb,
                           b);
    }
  }
  return std::nullopt;
}

// Every send on one side of virtual boundary `b` (virtual stages b and b + 1, Note [Chunks])
// has its receive on the other.
std::optional<std::string> CheckPairs(const Schedule& s, int b, std::vector<StageIndex>& index) {
  const int S = s.num_stages;
  const int st_lo = s.StageOf(b), c_lo = b / S, st_hi = s.StageOf(b + 1), c_hi = (b + 1) / S;
  StageIndex &lo = index[st_lo], &hi = index[st_hi];
  const std::string on_lo = c_lo == 0 ? "" : fmt::format(" chunk {}", c_lo);
  const std::string on_hi = c_hi == 0 ? "" : fmt::format(" chunk {}", c_hi);
  const auto& pl = s.programs[st_lo];
  const auto& ph = s.programs[st_hi];
  for (int mb = 0; mb < s.num_micro_batches; ++mb) {
    int sa = lo(Op::kSendAct, mb, c_lo), ra = hi(Op::kRecvAct, mb, c_hi);
    int sg = hi(Op::kSendGrad, mb, c_hi), rg = lo(Op::kRecvGrad, mb, c_lo);
    if (sa >= 0 && ra < 0)
      return At(st_lo, sa, pl[sa]) +
             fmt::format(": unmatched send, no RA{} on stage {}{}", mb, st_hi, on_hi);
    if (ra >= 0 && sa < 0)
      return At(st_hi, ra, ph[ra]) +
             fmt::format(": unmatched receive, no SA{} on stage {}{}", mb, st_lo, on_lo);
    if (sg >= 0 && rg < 0)
      return At(st_hi, sg, ph[sg]) +
             fmt::format(": unmatched send, no RG{} on stage {}{}", mb, st_lo, on_lo);
    if (rg >= 0 && sg < 0)
      return At(st_lo, rg, pl[rg]) +
             fmt::format(": unmatched receive, no SG{} on stage {}{}", mb, st_hi, on_hi);
  }
  return std::nullopt;
}

// Runs every list as far as it can (sends never block, a receive waits for its send);
// returns the blocked stages when some list cannot finish.
std::optional<std::string> DryRun(const Schedule& s) {
  const int n = s.num_stages, m = s.num_micro_batches;
  std::vector<int> pc(n, 0);
  // sent[b][mb]: bit 0 activation of mb sent across virtual boundary b, bit 1 its gradient.
  std::vector<std::vector<unsigned char>> sent(s.num_virtual_stages(),
                                               std::vector<unsigned char>(m, 0));
  bool progress = true;
  while (progress) {
    progress = false;
    for (int st = 0; st < n; ++st) {
      const auto& p = s.programs[st];
      while (pc[st] < static_cast<int>(p.size())) {
        const Instruction& in = p[pc[st]];
        const int vs = s.VirtualStage(st, in.chunk);
        if (in.op == Op::kRecvAct && !(sent[vs - 1][in.micro_batch] & 1)) break;
        if (in.op == Op::kRecvGrad && !(sent[vs][in.micro_batch] & 2)) break;
        if (in.op == Op::kSendAct) sent[vs][in.micro_batch] |= 1;
        if (in.op == Op::kSendGrad) sent[vs - 1][in.micro_batch] |= 2;
        ++pc[st];
        progress = true;
      }
    }
  }
  std::string blocked;
  for (int st = 0; st < n; ++st) {
    if (pc[st] == static_cast<int>(s.programs[st].size())) continue;
    const Instruction& in = s.programs[st][pc[st]];
    const int vs = s.VirtualStage(st, in.chunk);
    const int from = s.StageOf(in.op == Op::kRecvAct ? vs - 1 : vs + 1);
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
  if (s.num_chunks <= 0) return fmt::format("schedule has {} chunks", s.num_chunks);
  if (s.v_shape && s.num_chunks != 2)
    return fmt::format("schedule in a V has {} chunks per stage, not 2", s.num_chunks);
  std::vector<StageIndex> index(s.num_stages);
  for (int st = 0; st < s.num_stages; ++st)
    if (auto e = CheckStage(s, st, index[st])) return e;
  for (int b = 0; b + 1 < s.num_virtual_stages(); ++b)
    if (auto e = CheckPairs(s, b, index)) return e;
  for (int st = 0; st < s.num_stages; ++st)
    if (auto e = CheckOrder(s, st, index[st])) return e;
  return DryRun(s);
}

}  // namespace dapple
