// The one catch block of both executables (`dapple` and `dapple-torch`, Note [Two executables]
// in torch_commands.h): parses the command line into `app`, runs the chosen sub-command and
// turns what it throws into one line on stderr and an exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace dapple {

// Returns the exit code: 0 or CommandExitCode() after a sub-command ran; 2 for a bad command
// line or an InputError; 1 for any other error; 0 after --help or --version.
int RunApp(CLI::App& app, int argc, char** argv);

}  // namespace dapple
