#include "dapple/common/schedule_kind.h"

#include "dapple/common/error.h"

namespace dapple {

std::string ToString(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::kGPipe:
      return "gpipe";
    case ScheduleKind::kDappleA:
      return "dapple-a";
    case ScheduleKind::kDappleB:
      return "dapple-b";
    case ScheduleKind::kZbH1:
      return "zb-h1";
    case ScheduleKind::kInterleaved:
      return "interleaved";
    case ScheduleKind::kZbV:
      return "zb-v";
    case ScheduleKind::kVHalf:
      return "v-half";
    case ScheduleKind::kVMin:
      return "v-min";
    case ScheduleKind::kZbH2:
      return "zb-h2";
  }
  return "?";
}

bool SplitsBackward(ScheduleKind k) {
  return k == ScheduleKind::kZbH1 || k == ScheduleKind::kZbH2 || VShaped(k);
}

bool VShaped(ScheduleKind k) {
  return k == ScheduleKind::kZbV || k == ScheduleKind::kVHalf || k == ScheduleKind::kVMin;
}

ScheduleKind ParseScheduleKind(const std::string& s) {
  for (ScheduleKind k : AllScheduleKinds())
    if (ToString(k) == s) return k;
  ThrowInput("unknown schedule '{}' (known: {})", s, ScheduleNames());
}

void CheckChunks(ScheduleKind kind, int num_stages, int num_micro_batches, int num_chunks,
                 const std::string& field_prefix) {
  const std::string& at = field_prefix;
  if (num_chunks < 1) ThrowInput("{}virtual_stages: must be at least 1 (got {})", at, num_chunks);
  if (VShaped(kind) && num_chunks != 2)
    ThrowInput("{}virtual_stages: schedule '{}' runs 2 chunks per device group (a V), not {}", at,
               ToString(kind), num_chunks);
  if (num_chunks == 1 || VShaped(kind)) return;
  if (kind != ScheduleKind::kInterleaved)
    ThrowInput("{}virtual_stages: {} chunks per stage need schedule 'interleaved', not '{}'", at,
               num_chunks, ToString(kind));
  if (num_stages < 2)
    ThrowInput(
        "{}virtual_stages: {} chunks on {} stage: interleaving needs at least 2 stages (device "
        "groups)",
        at, num_chunks, num_stages);
  if (num_micro_batches < num_stages)
    ThrowInput(
        "{}num_micro_batches: {} micro-batches are fewer than the {} stages: interleaved 1F1B "
        "needs at least one micro-batch per stage (and a multiple of {})",
        at, num_micro_batches, num_stages, num_stages);
  if (num_micro_batches % num_stages != 0)
    ThrowInput(
        "{}num_micro_batches: {} is not a multiple of the {} stages (interleaved 1F1B sends "
        "micro-batches round in groups of one per stage)",
        at, num_micro_batches, num_stages);
}

std::vector<ScheduleKind> AllScheduleKinds() {
  return {ScheduleKind::kGPipe, ScheduleKind::kDappleA,     ScheduleKind::kDappleB,
          ScheduleKind::kZbH1,  ScheduleKind::kInterleaved, ScheduleKind::kZbV,
          ScheduleKind::kVHalf, ScheduleKind::kVMin,        ScheduleKind::kZbH2};
}

std::string ScheduleNames() {
  std::string names;
  for (ScheduleKind k : AllScheduleKinds()) names += (names.empty() ? "" : ", ") + ToString(k);
  return names;
}

}  // namespace dapple
