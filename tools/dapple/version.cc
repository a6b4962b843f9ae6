// `dapple --version`: see build_info.h.
#include <fmt/format.h>

#include "build_info.h"
#include "torch_commands.h"

namespace dapple {

std::string VersionText() {
  const BuildInfo& b = GetBuildInfo();
  std::string names;
  for (const TorchCommand& c : TorchCommands())
    names += (names.empty() ? "" : ", ") + std::string(c.name);
  std::string torch;
  if (!b.torch_built) {
    torch = "not built (configured with DAPPLE_WITH_TORCH=OFF)";
  } else if (std::string path = FindTorchExecutable(); !path.empty()) {
    torch = fmt::format("{} (libtorch {})", path, b.torch_version);
  } else {
    torch = fmt::format("built with libtorch {}, but dapple-torch is missing", b.torch_version);
  }
  return fmt::format("dapple {} (git {} at configure time, {}, {})\ntorch commands ({}): {}",
                     b.version, b.git, b.build_type, b.compiler, names, torch);
}

}  // namespace dapple
