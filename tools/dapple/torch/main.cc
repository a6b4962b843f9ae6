// `dapple-torch`: the sub-commands of dapple that need libtorch. `dapple` runs it for them with
// its own command line (Note [Two executables] in ../torch_commands.h); run directly, it
// behaves the same. A command added here is also named in ../torch_commands.cc, so that
// `dapple` lists it and hands it over.
#include <CLI/CLI.hpp>

#include "commands.h"
#include "run_app.h"

int main(int argc, char** argv) {
  CLI::App app{"dapple's libtorch commands (`dapple` runs this executable for them)"};
  app.require_subcommand(1);
  dapple::AddProfileCommand(app);
  dapple::AddTrainCommand(app);
  dapple::AddCalibrateCommand(app);
  dapple::AddExportCommand(app);
  return dapple::RunApp(app, argc, argv);
}
