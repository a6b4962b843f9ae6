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

// Reads a non-negative decimal number (no sign, no space) from the front of `text` and
// drops it from `text`.
bool ReadNumber(std::string_view& text, int& value) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc()) return false;
  text.remove_prefix(end - text.data());
  return true;
}

}  // namespace

std::string ToString(const Instruction& inst) {
  std::string s = Prefix(inst.op);
  if (HasMicroBatch(inst.op)) s += std::to_string(inst.micro_batch);
  if (HasMicroBatch(inst.op) && inst.chunk != 0) {
    s += 'c';
    s += std::to_string(inst.chunk);
  }
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
    Instruction inst{op, 0, 0};
    std::string_view rest = text.substr(p.size());
    if (!ReadNumber(rest, inst.micro_batch)) return std::nullopt;
    if (!rest.empty() && (rest[0] != 'c' || !ReadNumber(rest = rest.substr(1), inst.chunk)))
      return std::nullopt;
    if (!rest.empty()) return std::nullopt;
    return inst;
  }
  return std::nullopt;
}

}  // namespace dapple
