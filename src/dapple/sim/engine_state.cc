// The engine's deadlock report: see engine_state.h.
#include "dapple/sim/engine_state.h"

#include <fmt/format.h>

#include <string>

#include "dapple/common/error.h"

namespace dapple::internal {

void ThrowIfUnfinished(const EngineSetup& setup, const std::vector<DeviceState>& dev) {
  std::string blocked;
  int shown = 0, count = 0;
  for (size_t d = 0; d < dev.size(); ++d) {
    const EngineDevice& cfg = setup.devices[d];
    const EngineStage& st = setup.stages[cfg.stage];
    if (dev[d].pc >= st.length) continue;
    ++count;
    if (shown >= 8) continue;
    ++shown;
    const Instruction& in = st.program[dev[d].pc];
    blocked += fmt::format("{}stage {} replica {} pc {} {}", blocked.empty() ? "" : "; ", cfg.stage,
                           cfg.replica, dev[d].pc, ToString(in));
    if (in.micro_batch >= 0) blocked += fmt::format(" (micro-batch {})", in.micro_batch);
  }
  if (count == 0) return;
  if (count > shown) blocked += fmt::format("; and {} more", count - shown);
  throw Error("simulated schedule deadlocks: " + blocked);
}

}  // namespace dapple::internal
