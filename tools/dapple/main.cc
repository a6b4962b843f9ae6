// `dapple`: one executable, one sub-command per tool, and the one catch block.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "commands.h"
#include "dapple/common/error.h"

namespace dapple {
int& CommandExitCode() {
  static int code = 0;
  return code;
}
}  // namespace dapple

int main(int argc, char** argv) {
  CLI::App app{"dapple: synchronous pipeline- and data-parallel training (DAPPLE, PPoPP 2021)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dapple 0.1.0");
#ifdef DAPPLE_WITH_TORCH
  dapple::AddProfileCommand(app);
#endif
  dapple::AddPlanCommand(app);
  dapple::AddSimulateCommand(app);
#ifdef DAPPLE_WITH_TORCH
  dapple::AddTrainCommand(app);
  dapple::AddCalibrateCommand(app);
  dapple::AddExportCommand(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const dapple::InputError& e) {
    std::fprintf(stderr, "dapple: error: %s\n", e.what());
    return 2;
  } catch (const dapple::Error& e) {
    std::fprintf(stderr, "dapple: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dapple: internal error: %s\n", e.what());
    return 1;
  }
  return dapple::CommandExitCode();
}
