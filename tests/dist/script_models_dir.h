// The models and data files tests/torch/script_models.py writes, shared by the tests that
// read them: one run of the script costs 3-4 s here (Python importing torch, scripting the
// models), and each test is its own process, so every suite set-up paid it again.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "dist/train_test_util.h"

namespace dapple::testing {

// A folder holding what `script_models.py write` writes, made once per version of the
// script (and of examples/gpt_kjv.py, whose layers it uses) under $DAPPLE_CACHE_DIR (the
// build's test-cache folder) and reused after that. The tests only read it. Written into a
// folder of this process's own, then renamed into place, so a reader never sees it half
// written. Fails the calling test (and returns an empty path) when the script fails.
inline fs::path ScriptModelsDir() {
  const fs::path source = DAPPLE_SOURCE_DIR;
  const fs::path script = source / "tests/torch/script_models.py";
  const std::string key = Slurp(script) + Slurp(source / "examples/gpt_kjv.py");
  const char* cache = std::getenv("DAPPLE_CACHE_DIR");
  const fs::path base = cache ? fs::path(cache) : fs::temp_directory_path();
  const fs::path dir = base / ("script-models-" + std::to_string(std::hash<std::string>{}(key)));
  if (fs::exists(dir / "complete")) return dir;
  const fs::path fresh = dir.string() + ".writing-" + std::to_string(::getpid());
  fs::remove_all(fresh);
  fs::create_directories(fresh);
  const std::string cmd = "/usr/bin/python3 " + script.string() + " write " + fresh.string();
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << cmd;
    fs::remove_all(fresh);
    return {};
  }
  std::ofstream(fresh / "complete") << "written by " << cmd << "\n";
  std::error_code ec;
  fs::rename(fresh, dir, ec);  // another test may have put its copy there first: keep that
  if (ec) fs::remove_all(fresh);
  return dir;
}

}  // namespace dapple::testing
