// What `dapple --version` says about the build. The values are fixed when CMake configures the
// build (build_info.cc.in): a commit made since then is not seen until the next configure.
#pragma once

#include <string>

namespace dapple {

struct BuildInfo {
  const char* version;        // the project's version, "0.1.0"
  const char* git;            // `git describe --always --dirty` of the source tree, or "unknown"
  const char* build_type;     // CMAKE_BUILD_TYPE, "RelWithDebInfo"
  const char* compiler;       // "GNU 12.2.0"
  bool torch_built;           // DAPPLE_WITH_TORCH: dapple-torch is part of this build
  const char* torch_version;  // libtorch's version when torch_built, else ""
  // Where an installed dapple-torch lies, relative to the installed `dapple`: the install's
  // libexec directory from its bin directory, "../libexec/dapple".
  const char* libexec_from_bin;
};

const BuildInfo& GetBuildInfo();

// The text of `dapple --version`: the version, commit, build type and compiler, and whether the
// torch commands are there (and where dapple-torch is). version.cc.
std::string VersionText();

}  // namespace dapple
