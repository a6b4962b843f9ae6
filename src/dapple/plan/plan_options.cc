// The planner kinds by name (`dapple plan --planner`) and the micro-batch sizes a global
// batch allows: see plan_options.h.
#include "dapple/plan/plan_options.h"

#include <fmt/format.h>

#include "dapple/common/error.h"

namespace dapple {

std::vector<PlannerKind> AllPlanners() {
  return {PlannerKind::kDapple, PlannerKind::kDataParallel, PlannerKind::kStraight,
          PlannerKind::kGPipe,  PlannerKind::kPipeDream,    PlannerKind::kExhaustive};
}

std::string ToString(PlannerKind k) {
  switch (k) {
    case PlannerKind::kDapple:
      return "dapple";
    case PlannerKind::kDataParallel:
      return "dp";
    case PlannerKind::kStraight:
      return "straight";
    case PlannerKind::kGPipe:
      return "gpipe";
    case PlannerKind::kPipeDream:
      return "pipedream";
    case PlannerKind::kExhaustive:
      return "exhaustive";
  }
  DAPPLE_CHECK(false);
  return {};
}

std::string PlannerNames() {
  std::string names;
  for (PlannerKind k : AllPlanners()) names += (names.empty() ? "" : ", ") + ToString(k);
  return names;
}

PlannerKind ParsePlannerKind(const std::string& name) {
  for (PlannerKind k : AllPlanners())
    if (ToString(k) == name) return k;
  ThrowInput("unknown planner '{}' (known: {})", name, PlannerNames());
}

std::vector<int> MicroBatchSizes(int global_batch) {
  std::vector<int> sizes;
  for (int m = 1; m <= global_batch; ++m)
    if (global_batch % m == 0) sizes.push_back(m);
  return sizes;
}

}  // namespace dapple
