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
  }
  return "?";
}

bool SplitsBackward(ScheduleKind k) { return k == ScheduleKind::kZbH1; }

ScheduleKind ParseScheduleKind(const std::string& s) {
  for (ScheduleKind k : AllScheduleKinds())
    if (ToString(k) == s) return k;
  ThrowInput("unknown schedule '{}' (known: gpipe, dapple-a, dapple-b, zb-h1)", s);
}

std::vector<ScheduleKind> AllScheduleKinds() {
  return {ScheduleKind::kGPipe, ScheduleKind::kDappleA, ScheduleKind::kDappleB,
          ScheduleKind::kZbH1};
}

}  // namespace dapple
