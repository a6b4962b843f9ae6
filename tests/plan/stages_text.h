// A plan's stages as one line, "[first-last: devices]..." (for comparing plans in tests).
#pragma once

#include <string>

#include "dapple/format/plan.h"

namespace dapple::testing {

inline std::string StagesText(const Plan& p) {
  std::string s;
  for (const StagePlan& st : p.stages) {
    s += "[" + std::to_string(st.first_layer) + "-" + std::to_string(st.last_layer) + ":";
    for (int d : st.devices) s += " " + std::to_string(d);
    if (st.shard_optimizer) s += " sharded";
    s += "]";
  }
  return s;
}

}  // namespace dapple::testing
