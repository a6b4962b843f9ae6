// The torch commands as `dapple` sees them: names and summaries only, and the executable that
// runs them.
//
// Note [Two executables]
// ~~~~~~~~~~~~~~~~~~~~~~
// libtorch is a few hundred shared libraries: an executable linked with it spends time and memory
// loading them before main runs, whatever it then does (docs/startup.md). `plan` and `simulate`
// never touch a tensor, so they live in `dapple`, which does not link libtorch; `profile`, `train`,
// `calibrate` (every tools/dapple/torch/*.cc) live in `dapple-torch`. `dapple` knows those
// commands only by name and summary (torch_commands.cc) and, when its first argument names one,
// replaces itself with dapple-torch (execv, the same argv), as git runs its sub-commands: the
// same process, environment and streams, and dapple-torch's exit status. dapple-torch
// re-executes itself (/proc/self/exe) for its launcher's workers, so those never pass through
// `dapple` again.
//
// dapple-torch is looked for next to `dapple` (the build tree: build/tools/dapple/) and then in
// the libexec directory of an installed tree (`cmake --install` puts dapple in bin/ and
// dapple-torch in libexec/dapple/), from the real path of the running `dapple`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace dapple {

struct TorchCommand {
  const char* name;
  const char* summary;  // as dapple-torch's own --help gives it
};

// The commands of dapple-torch, in its order.
const std::vector<TorchCommand>& TorchCommands();

// The entry named `name`, or nullptr.
const TorchCommand* FindTorchCommand(std::string_view name);

// Lists every torch command in `app`'s help, in a group of its own. The sub-commands added are
// placeholders: main hands these names to dapple-torch before `app` parses anything.
void AddTorchCommandPlaceholders(CLI::App& app);

// The places dapple-torch is looked for, in order (absolute paths).
std::vector<std::string> TorchExecutableCandidates();

// The first candidate that is an executable file, or "".
std::string FindTorchExecutable();

// Runs dapple-torch with this argv in place of this process. Returns only when it cannot: then
// it has printed one line saying why (not found, where it looked; or the exec error) and the
// return value is the exit code, 1.
int ExecTorchCommand(int argc, char** argv);

}  // namespace dapple
