// The compact text form of a schedule (docs/schedules.md): one line per stage,
// "stage 0: F0 F1 B0 F2 B1 B2". Blank lines and lines starting with '#' are comments.
#include <algorithm>
#include <sstream>

#include "dapple/common/error.h"
#include "dapple/schedule/schedule.h"

namespace dapple {

std::string ScheduleToText(const Schedule& s) {
  std::string out = s.v_shape ? "placement: v\n" : "";
  for (int st = 0; st < static_cast<int>(s.programs.size()); ++st) {
    out += "stage " + std::to_string(st) + ":";
    for (const Instruction& in : s.programs[st]) {
      out += ' ';
      out += ToString(in);
    }
    out += '\n';
  }
  return out;
}

Schedule ParseScheduleText(const std::string& text) {
  Schedule s;
  std::istringstream in(text);
  std::string line;
  int line_no = 0, max_mb = -1, max_chunk = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    std::istringstream words(line.substr(start));
    std::string word, label;
    words >> word >> label;
    if (word == "placement:" && label == "v" && s.num_stages == 0 && !s.v_shape) {
      s.v_shape = true;  // Note [V placement]
      continue;
    }
    const std::string expected = std::to_string(s.num_stages) + ":";
    if (word != "stage" || label != expected)
      ThrowInput("schedule text line {}: expected 'stage {}' followed by the instructions", line_no,
                 expected);
    std::vector<Instruction>& p = s.programs.emplace_back();
    while (words >> word) {
      std::optional<Instruction> inst = ParseInstruction(word);
      if (!inst)
        ThrowInput(
            "schedule text line {}: '{}' is not an instruction (F3 B3 I3 W3 SA3 RA3 SG3 RG3 "
            "AR STEP, F3c1 on chunk 1)",
            line_no, word);
      p.push_back(*inst);
      max_mb = std::max(max_mb, inst->micro_batch);
      max_chunk = std::max(max_chunk, inst->chunk);
    }
    ++s.num_stages;
  }
  if (s.num_stages == 0) ThrowInput("schedule text: no 'stage 0:' line");
  s.num_micro_batches = max_mb + 1;
  s.num_chunks = max_chunk + 1;  // Note [Chunks]
  return s;
}

}  // namespace dapple
