// CheckSimulable and ViewOf: see simulator.h.
#include <fmt/format.h>

#include "dapple/common/error.h"
#include "dapple/sim/simulator.h"

namespace dapple {

void CheckSimulable(const ScheduleView& lowered) {
  const int S = lowered.num_stages, M = lowered.num_micro_batches;
  const int V = lowered.num_stages * lowered.num_chunks;
  for (int s = 0; s < S; ++s) {
    for (const Instruction& in : *lowered.programs[s]) {
      const int vs = VirtualStageOf(s, in.chunk, S, lowered.v_shape);
      bool ok = in.chunk >= 0 && in.chunk < lowered.num_chunks;
      switch (in.op) {
        case Op::kForward:
        case Op::kBackward:
        case Op::kInputGrad:
        case Op::kWeightGrad:
          break;
        case Op::kRecvAct:
        case Op::kSendGrad:
          ok = ok && vs > 0;
          break;
        case Op::kSendAct:
        case Op::kRecvGrad:
          ok = ok && vs < V - 1;
          break;
        case Op::kAllReduceGrads:
        case Op::kOptimizerStep:
          continue;
      }
      if (!ok || in.micro_batch < 0 || in.micro_batch >= M)
        throw Error(fmt::format("cannot simulate: stage {} has {}", s, ToString(in)));
    }
  }
}

ScheduleView ViewOf(const Schedule& lowered) {
  ScheduleView view{lowered.num_stages, lowered.num_micro_batches, lowered.num_chunks, {}};
  view.v_shape = lowered.v_shape;
  for (const std::vector<Instruction>& p : lowered.programs) view.programs.push_back(&p);
  return view;
}

}  // namespace dapple
