// The `dapple` sub-commands. Each Add*Command registers its sub-command, options and
// callback on `app`; the callback throws dapple::Error subclasses on failure, which `main`
// turns into one line and an exit code (InputError: 2, other errors: 1).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace dapple {

void AddSimulateCommand(CLI::App& app);
void AddPlanCommand(CLI::App& app);
#ifdef DAPPLE_WITH_TORCH
void AddProfileCommand(CLI::App& app);
void AddTrainCommand(CLI::App& app);
void AddCalibrateCommand(CLI::App& app);
void AddExportCommand(CLI::App& app);
#endif

// A callback that wants a specific non-zero exit code without an error message (for
// example a launcher relaying a child's failure) sets it here.
int& CommandExitCode();

// `s` cut to `n` characters, its last two "..", for a table's column. REQUIRES: n >= 2.
inline std::string Shorten(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 2) + "..";
}

}  // namespace dapple
