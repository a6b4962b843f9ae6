// The torch commands seen from `dapple`: see torch_commands.h, Note [Two executables].
#include "torch_commands.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "build_info.h"

namespace dapple {
namespace {

constexpr const char* kTorchExecutable = "dapple-torch";

// The directory of the running executable, symbolic links resolved; "" when unknown.
std::filesystem::path SelfDirectory() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : self.parent_path();
}

}  // namespace

const std::vector<TorchCommand>& TorchCommands() {
  // The summaries are those of the Add*Command of tools/dapple/torch/ (a test compares them).
  static const std::vector<TorchCommand> commands = {
      {"profile", "Profile a zoo model layer by layer on this CPU (forward/backward times, sizes)"},
      {"train",
       "Train a model under a plan: pipeline + data parallel over c10d (one process per "
       "device)"},
      {"calibrate",
       "Measure latency and bandwidth inside and between servers and allreduce time through "
       "c10d, and write a dapple-cluster/1 file"},
      {"export",
       "Write a TorchScript model (for a .pt2 model: a state_dict, or the program) with the "
       "trained weights of a dapple checkpoint"},
  };
  return commands;
}

const TorchCommand* FindTorchCommand(std::string_view name) {
  for (const TorchCommand& c : TorchCommands())
    if (name == c.name) return &c;
  return nullptr;
}

void AddTorchCommandPlaceholders(CLI::App& app) {
  for (const TorchCommand& c : TorchCommands())
    app.add_subcommand(c.name, c.summary)->group("Torch commands (run by dapple-torch)");
}

std::vector<std::string> TorchExecutableCandidates() {
  std::filesystem::path dir = SelfDirectory();
  if (dir.empty()) return {};
  return {(dir / kTorchExecutable).string(),
          (dir / GetBuildInfo().libexec_from_bin / kTorchExecutable).lexically_normal().string()};
}

std::string FindTorchExecutable() {
  for (const std::string& path : TorchExecutableCandidates())
    if (access(path.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(path)) return path;
  return "";
}

int ExecTorchCommand(int argc, char** argv) {
  std::string path = FindTorchExecutable();
  if (path.empty()) {
    std::vector<std::string> looked = TorchExecutableCandidates();
    std::string where = looked.empty() ? "(cannot read /proc/self/exe)" : looked[0];
    for (size_t i = 1; i < looked.size(); ++i) where += " or " + looked[i];
    std::fprintf(stderr, "dapple: error: `%s` needs %s, which is not at %s%s\n", argv[1],
                 kTorchExecutable, where.c_str(),
                 GetBuildInfo().torch_built ? ""
                                            : " (this build has no libtorch commands: "
                                              "configure with -DDAPPLE_WITH_TORCH=ON)");
    return 1;
  }
  std::vector<char*> args(argv, argv + argc);
  args.push_back(nullptr);
  std::fflush(nullptr);
  execv(path.c_str(), args.data());
  std::fprintf(stderr, "dapple: error: cannot run %s: %s\n", path.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace dapple
