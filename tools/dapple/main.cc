// `dapple`: the front door. `plan` and `simulate` run here, without libtorch; the torch
// commands are handed to dapple-torch (Note [Two executables] in torch_commands.h).
#include <CLI/CLI.hpp>

#include "build_info.h"
#include "commands.h"
#include "run_app.h"
#include "torch_commands.h"

int main(int argc, char** argv) {
  if (argc > 1 && dapple::FindTorchCommand(argv[1]) != nullptr)
    return dapple::ExecTorchCommand(argc, argv);
  CLI::App app{"dapple: synchronous pipeline- and data-parallel training (DAPPLE, PPoPP 2021)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", dapple::VersionText);
  dapple::AddPlanCommand(app);
  dapple::AddSimulateCommand(app);
  dapple::AddTorchCommandPlaceholders(app);
  return dapple::RunApp(app, argc, argv);
}
