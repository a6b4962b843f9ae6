// One instruction of one stage's program: the seam between the schedules, the simulator
// and the runtime (docs/design.md section 3). Text form: F3 B3 I3 W3 SA3 RA3 SG3 RG3 AR STEP.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dapple {

enum class Op : uint8_t {
  kForward,         // F<mb>: forward of micro-batch mb on this stage
  kBackward,        // B<mb>: backward of micro-batch mb (input and weight gradients)
  kInputGrad,       // I<mb>: the input gradient only; keeps what W<mb> needs (zb schedules)
  kWeightGrad,      // W<mb>: the weight gradients of mb, after its I<mb>; frees its activations
  kSendAct,         // SA<mb>: send mb's output activation; paired with RA<mb> on stage+1
  kRecvAct,         // RA<mb>: receive mb's input activation from stage-1
  kSendGrad,        // SG<mb>: send mb's input gradient; paired with RG<mb> on stage-1
  kRecvGrad,        // RG<mb>: receive mb's output gradient from stage+1
  kAllReduceGrads,  // AR: allreduce the accumulated gradients among the stage's replicas
  kOptimizerStep,   // STEP: apply the optimizer once
};

struct Instruction {
  Op op = Op::kForward;
  int micro_batch = -1;  // -1 for AR and STEP
  friend bool operator==(const Instruction&, const Instruction&) = default;
};

std::string ToString(const Instruction& inst);
std::optional<Instruction> ParseInstruction(std::string_view text);

}  // namespace dapple
