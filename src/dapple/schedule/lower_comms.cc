// The communication pass: turns compute-only programs into the lists the simulator and the
// runtime execute (docs/design.md section 3).
#include "dapple/common/error.h"
#include "dapple/schedule/schedule.h"

namespace dapple {

// Each receive sits immediately before the compute that needs it and each send
// immediately after the compute that produced it, so a stage never waits for data earlier
// than its own order requires and never holds produced data back.
Schedule LowerComms(const Schedule& compute_only, const std::vector<int>& replicas) {
  const int num_stages = compute_only.num_stages;
  DAPPLE_CHECK(static_cast<int>(compute_only.programs.size()) == num_stages);
  DAPPLE_CHECK(static_cast<int>(replicas.size()) == num_stages, "one replica count per stage");
  Schedule out;
  out.num_stages = num_stages;
  out.num_micro_batches = compute_only.num_micro_batches;
  out.num_chunks = compute_only.num_chunks;
  out.v_shape = compute_only.v_shape;
  out.programs.resize(num_stages);
  const int last_virtual = compute_only.num_virtual_stages() - 1;
  for (int s = 0; s < num_stages; ++s) {
    std::vector<Instruction>& p = out.programs[s];
    p.reserve(compute_only.programs[s].size() * 3 + 2);
    for (const Instruction& in : compute_only.programs[s]) {
      DAPPLE_CHECK(in.op == Op::kForward || in.op == Op::kBackward || in.op == Op::kInputGrad ||
                       in.op == Op::kWeightGrad,
                   "LowerComms needs compute-only programs");
      const int mb = in.micro_batch, c = in.chunk;
      const int vs = compute_only.VirtualStage(s, c);
      const bool first = vs == 0, last = vs == last_virtual;
      if (in.op == Op::kWeightGrad) {  // needs nothing from a neighbour, sends nothing
        p.push_back(in);
      } else if (in.op == Op::kForward) {
        if (!first) p.push_back({Op::kRecvAct, mb, c});
        p.push_back(in);
        if (!last) p.push_back({Op::kSendAct, mb, c});
      } else {
        if (!last) p.push_back({Op::kRecvGrad, mb, c});
        p.push_back(in);
        if (!first) p.push_back({Op::kSendGrad, mb, c});
      }
    }
    if (replicas[s] > 1) p.push_back({Op::kAllReduceGrads, -1, 0});
    p.push_back({Op::kOptimizerStep, -1, 0});
  }
  return out;
}

}  // namespace dapple
