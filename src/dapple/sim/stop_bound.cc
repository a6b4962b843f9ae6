// The lower bound behind SimOptions::stop_above_ms: see stop_bound.h.
//
// Note [Stopping above a time]
// The planner asks most simulations only whether a plan is faster than one it has (a
// neighbour against the current plan, a proposal against the best so far), and most
// answers are no. So a run may stop as soon as it proves the plan slower. What it proves
// with, at any moment of the run:
// * A device runs its list in order, and each instruction takes at least its listed cost
//   (resuming and waking only add, and nothing scales without shared compute; an allreduce
//   without buckets takes at least allreduce_ms, one with buckets at least nothing): it
//   cannot end before its clock plus the listed costs it has not run.
// * The pipeline's drain: with one chunk, when stage g's last backward (B, or I in the
//   split schedules) is for the micro-batch whose gradient it receives last, and stage
//   g + 1's last backward is for that micro-batch too, the former starts no earlier than
//   the latter ends on every replica plus the gradient's transfer (contention only
//   delays). So the bound of stage g + 1's last backward carries down the stages, each
//   adding its own last backward and what follows it in its list (deferred W's, AR,
//   STEP). This is what makes the bound tight early: once the stage that sets the pace is
//   busy, its bound is its end, and the drain below it is the rest of the iteration.
// Each device's last backward is recorded when it ends; before that its bound is its clock
// plus the listed costs up to it. The engine asks every `devices` times a device stops
// running (O(devices) each time), and stops when the bound exceeds stop_above_ms by a
// relative 1e-9, which keeps the rounding of the sums from stopping a run that would end
// just at stop_above_ms. tests/sim/stop_bound_test.cc checks on random plans that a run
// given its own time (plus 1e-6) never stops and that one given less stops with a bound
// between the two.
#include "dapple/sim/stop_bound.h"

#include "dapple/common/error.h"

namespace dapple::internal {

namespace {

// Listed cost of one instruction of device d (0 for communication and, with buckets, AR).
double ListedCost(const EngineSetup& s, const EngineStage& st, int d, const Instruction& in) {
  const EngineChunkCost& c = s.costs[s.devices[d].first_cost + in.chunk];
  switch (in.op) {
    case Op::kForward:
      return c.forward_ms;
    case Op::kBackward:
      return c.backward_ms;
    case Op::kInputGrad:
      return c.input_grad_ms;
    case Op::kWeightGrad:
      return c.weight_grad_ms;
    case Op::kOptimizerStep:
      return s.devices[d].step_ms;
    case Op::kAllReduceGrads:
      return st.bucket_ms.empty() ? st.allreduce_ms : 0.0;
    case Op::kSendAct:
    case Op::kSendGrad:
    case Op::kRecvAct:
    case Op::kRecvGrad:
      return 0;
  }
  return 0;
}

}  // namespace

void StopBound::Prepare(const EngineSetup& s) {
  setup_ = &s;
  const int S = s.num_stages, v = s.num_chunks;
  const size_t D = s.devices.size();
  last_backward_pc_.assign(S, -1);
  chained_.assign(S, 0);
  work_.assign(D, 0.0);
  tail_.assign(D, 0.0);
  last_cost_.assign(D, 0.0);
  std::vector<int> last_mb(S, -1), recv_pc(S, -1), recv_mb(S, -1), send_pc(S, -1), send_mb(S, -1);
  std::vector<int> count;  // [chunk * 4 + k]: F, B, I, W of the stage's list
  for (int g = 0; g < S; ++g) {
    const EngineStage& st = s.stages[g];
    count.assign(4 * v, 0);
    int steps = 0, allreduces = 0;
    for (int pc = 0; pc < st.length; ++pc) {
      const Instruction& in = st.program[pc];
      switch (in.op) {
        case Op::kForward:
          ++count[4 * in.chunk];
          break;
        case Op::kBackward:
        case Op::kInputGrad:
          ++count[4 * in.chunk + (in.op == Op::kBackward ? 1 : 2)];
          last_backward_pc_[g] = pc;
          last_mb[g] = in.micro_batch;
          break;
        case Op::kWeightGrad:
          ++count[4 * in.chunk + 3];
          break;
        case Op::kOptimizerStep:
          ++steps;
          break;
        case Op::kAllReduceGrads:
          ++allreduces;
          break;
        case Op::kRecvGrad:
          recv_pc[g] = pc;
          recv_mb[g] = in.micro_batch;
          break;
        case Op::kSendGrad:
          send_pc[g] = pc;
          send_mb[g] = in.micro_batch;
          break;
        case Op::kSendAct:
        case Op::kRecvAct:
          break;
      }
    }
    for (int d = st.first_device; d < st.first_device + st.replicas; ++d) {
      const EngineChunkCost* c = s.costs.data() + s.devices[d].first_cost;
      double w = steps * s.devices[d].step_ms +
                 (st.bucket_ms.empty() ? allreduces * st.allreduce_ms : 0.0);
      for (int k = 0; k < v; ++k)
        w += count[4 * k] * c[k].forward_ms + count[4 * k + 1] * c[k].backward_ms +
             count[4 * k + 2] * c[k].input_grad_ms + count[4 * k + 3] * c[k].weight_grad_ms;
      work_[d] = w;
      const int last = last_backward_pc_[g];
      if (last < 0) continue;
      last_cost_[d] = ListedCost(s, st, d, st.program[last]);
      for (int pc = last + 1; pc < st.length; ++pc)
        tail_[d] += ListedCost(s, st, d, st.program[pc]);
    }
  }
  // Stage g's last backward waits for the gradient of micro-batch last_mb[g] (received
  // before it), which stage g + 1 sends after its own last backward of that micro-batch.
  for (int g = 0; g + 1 < S && v == 1; ++g)
    chained_[g] = last_backward_pc_[g] >= 0 && last_backward_pc_[g + 1] >= 0 && recv_pc[g] >= 0 &&
                  recv_pc[g] < last_backward_pc_[g] && recv_mb[g] == last_mb[g] &&
                  last_mb[g + 1] == last_mb[g] && send_pc[g + 1] > last_backward_pc_[g + 1] &&
                  send_mb[g + 1] == last_mb[g];
}

}  // namespace dapple::internal
