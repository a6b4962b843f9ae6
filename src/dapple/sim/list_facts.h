// What the simulator's early stop (Note [Stopping above a time] in stop_bound.cc) reads of
// one stage's lowered list, gathered in one pass over it. The planner's memo gathers it
// once per list and hands it to every run (ListsChecked in simulator.h) instead of a pass per run.
#pragma once

#include <vector>

#include "dapple/schedule/instruction.h"

namespace dapple {

struct ListFacts {
  std::vector<int> count;  // [chunk * 4 + k]: forwards, B's, I's and W's of each chunk
  int steps = 0, allreduces = 0;
  int last_backward_pc = -1, last_backward_mb = -1;  // the last B or I
  int last_recv_grad_pc = -1, last_recv_grad_mb = -1;
  int last_send_grad_pc = -1, last_send_grad_mb = -1;
  // The last instruction that produces weight gradients (B or W), the last compute (F, B,
  // I or W), the last receive (either kind) and the last AR.
  int last_weight_grads_pc = -1, last_compute_pc = -1, last_recv_pc = -1, last_allreduce_pc = -1;
};

ListFacts FactsOf(const Instruction* program, int length, int chunks);

}  // namespace dapple
