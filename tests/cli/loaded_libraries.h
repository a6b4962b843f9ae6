// Which shared objects a command loads, as the dynamic loader itself reports them
// (LD_DEBUG=files: one "file=NAME [N];  generating link map" line for every object it maps,
// whether a program needs it or dlopen asks for it later, across an exec too).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace dapple::testing {

struct LoadedLibraries {
  int code = -1;               // the command's exit code
  std::set<std::string> libs;  // "libc.so.6", "libtorch_cpu.so.1.13", ...
  bool Has(const std::string& part) const {
    for (const std::string& l : libs)
      if (l.find(part) != std::string::npos) return true;
    return false;
  }
};

// Runs `command` (a shell command line) with LD_DEBUG=files, its stderr into `log`.
inline LoadedLibraries RunAndListLibraries(const std::string& command,
                                           const std::filesystem::path& log) {
  int status = std::system(("LD_DEBUG=files " + command + " >/dev/null 2>" + log.string()).c_str());
  LoadedLibraries r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(log);
  const std::string key = "file=", tail = "generating link map";
  for (std::string line; std::getline(in, line);) {
    size_t at = line.find(key);
    if (at == std::string::npos || line.find(tail) == std::string::npos) continue;
    at += key.size();
    r.libs.insert(line.substr(at, line.find(' ', at) - at));
  }
  return r;
}

}  // namespace dapple::testing
