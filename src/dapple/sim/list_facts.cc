// One pass over a lowered list: see list_facts.h.
#include "dapple/sim/list_facts.h"

namespace dapple {

ListFacts FactsOf(const Instruction* program, int length, int chunks) {
  ListFacts f;
  f.count.assign(4 * chunks, 0);
  for (int pc = 0; pc < length; ++pc) {
    const Instruction& in = program[pc];
    switch (in.op) {
      case Op::kForward:
        ++f.count[4 * in.chunk];
        f.last_compute_pc = pc;
        break;
      case Op::kBackward:
      case Op::kInputGrad:
        ++f.count[4 * in.chunk + (in.op == Op::kBackward ? 1 : 2)];
        f.last_backward_pc = f.last_compute_pc = pc;
        f.last_backward_mb = in.micro_batch;
        if (in.op == Op::kBackward) f.last_weight_grads_pc = pc;
        break;
      case Op::kWeightGrad:
        ++f.count[4 * in.chunk + 3];
        f.last_weight_grads_pc = f.last_compute_pc = pc;
        break;
      case Op::kOptimizerStep:
        ++f.steps;
        break;
      case Op::kAllReduceGrads:
        ++f.allreduces;
        f.last_allreduce_pc = pc;
        break;
      case Op::kRecvGrad:
        f.last_recv_grad_pc = f.last_recv_pc = pc;
        f.last_recv_grad_mb = in.micro_batch;
        break;
      case Op::kSendGrad:
        f.last_send_grad_pc = pc;
        f.last_send_grad_mb = in.micro_batch;
        break;
      case Op::kRecvAct:
        f.last_recv_pc = pc;
        break;
      case Op::kSendAct:
        break;
    }
  }
  return f;
}

}  // namespace dapple
