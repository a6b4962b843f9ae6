#include "dapple/schedule/instruction.h"

#include <charconv>

namespace dapple {
namespace {

// Text prefix of each op; AR and STEP carry no micro-batch.
const char* Prefix(Op op) {
  switch (op) {
    case Op::kForward:
      return "F";
    case Op::kBackward:
      return "B";
    case Op::kInputGrad:
      return "I";
    case Op::kWeightGrad:
      return "W";
    case Op::kSendAct:
      return "SA";
    case Op::kRecvAct:
      return "RA";
    case Op::kSendGrad:
      return "SG";
    case Op::kRecvGrad:
      return "RG";
    case Op::kAllReduceGrads:
      return "AR";
    case Op::kOptimizerStep:
      return "STEP";
  }
  return "?";
}

bool HasMicroBatch(Op op) { return op != Op::kAllReduceGrads && op != Op::kOptimizerStep; }

}  // namespace

std::string ToString(const Instruction& inst) {
  std::string s = Prefix(inst.op);
  if (HasMicroBatch(inst.op)) s += std::to_string(inst.micro_batch);
  return s;
}

std::optional<Instruction> ParseInstruction(std::string_view text) {
  if (text == "AR") return Instruction{Op::kAllReduceGrads, -1};
  if (text == "STEP") return Instruction{Op::kOptimizerStep, -1};
  // Longest prefixes first, so "SA" is not read as something shorter.
  static constexpr Op kWithMb[] = {Op::kSendAct, Op::kRecvAct,  Op::kSendGrad,  Op::kRecvGrad,
                                   Op::kForward, Op::kBackward, Op::kInputGrad, Op::kWeightGrad};
  for (Op op : kWithMb) {
    std::string_view p = Prefix(op);
    if (text.size() <= p.size() || text.substr(0, p.size()) != p) continue;
    std::string_view digits = text.substr(p.size());
    if (digits[0] < '0' || digits[0] > '9') return std::nullopt;  // no sign, no space
    int mb = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), mb);
    if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return Instruction{op, mb};
  }
  return std::nullopt;
}

}  // namespace dapple
