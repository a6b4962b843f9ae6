// One pass over a lowered list: see list_facts.h.
#include "dapple/sim/list_facts.h"

namespace dapple {

ListFacts FactsOf(const Instruction* program, int length, int chunks) {
  ListFacts f;
  f.count.assign(4 * chunks, 0);
  for (int pc = 0; pc < length; ++pc) {
    const Instruction& in = program[pc];
    if (in.op == Op::kForward || in.op == Op::kBackward || in.op == Op::kInputGrad ||
        in.op == Op::kWeightGrad)
      f.last_compute_pc = pc;
    if (in.op == Op::kBackward || in.op == Op::kWeightGrad) f.last_weight_grads_pc = pc;
    if (in.op == Op::kRecvAct || in.op == Op::kRecvGrad) f.last_recv_pc = pc;
    switch (in.op) {
      case Op::kForward:
        ++f.count[4 * in.chunk];
        break;
      case Op::kBackward:
      case Op::kInputGrad:
        ++f.count[4 * in.chunk + (in.op == Op::kBackward ? 1 : 2)];
        f.last_backward_pc = pc;
        f.last_backward_mb = in.micro_batch;
        break;
      case Op::kWeightGrad:
        ++f.count[4 * in.chunk + 3];
        break;
      case Op::kOptimizerStep:
        ++f.steps;
        break;
      case Op::kAllReduceGrads:
        ++f.allreduces;
        f.last_allreduce_pc = pc;
        break;
      case Op::kRecvGrad:
        f.last_recv_grad_pc = pc;
        f.last_recv_grad_mb = in.micro_batch;
        break;
      case Op::kSendGrad:
        f.last_send_grad_pc = pc;
        f.last_send_grad_mb = in.micro_batch;
        break;
      case Op::kSendAct:
      case Op::kRecvAct:
        break;
    }
  }
  return f;
}

}  // namespace dapple
