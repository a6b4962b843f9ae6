// The models and data files tests/torch/*.py write, shared by the tests that
// read them: one run of the script costs 3-4 s here (Python importing torch, scripting the
// models), and each test is its own process, so every suite set-up paid it again.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "dist/train_test_util.h"

namespace dapple::testing {

// A folder holding what `SCRIPT write DIR` writes (SCRIPT under tests/torch/), made once per
// version of the script and of `more` (the sources it imports) under $DAPPLE_CACHE_DIR (the
// build's test-cache folder) and reused after that. The tests only read it. Written into a
// folder of this process's own, then renamed into place, so a reader never sees it half
// written. Fails the calling test (and returns an empty path) when the script fails.
inline fs::path WrittenModelsDir(const std::string& script_name,
                                 const std::vector<std::string>& more) {
  const fs::path source = DAPPLE_SOURCE_DIR;
  const fs::path script = source / "tests/torch" / script_name;
  std::string key = Slurp(script);
  for (const auto& m : more) key += Slurp(source / m);
  const char* cache = std::getenv("DAPPLE_CACHE_DIR");
  const fs::path base = cache ? fs::path(cache) : fs::temp_directory_path();
  const fs::path dir =
      base / (script.stem().string() + "-" + std::to_string(std::hash<std::string>{}(key)));
  if (fs::exists(dir / "complete")) return dir;
  const fs::path fresh = dir.string() + ".writing-" + std::to_string(::getpid());
  fs::remove_all(fresh);
  fs::create_directories(fresh);
  const std::string cmd = std::string(DAPPLE_PYTHON) + " " + script.string() + " write " + fresh.string();
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

// What tests/torch/script_models.py writes (it imports examples/gpt_kjv.py).
inline fs::path ScriptModelsDir() {
  return WrittenModelsDir("script_models.py", {"examples/gpt_kjv.py"});
}

// What tests/torch/graph_models.py writes: models as people write them (torchvision's as
// shipped, a GPT with a ModuleList loop, a U-Net), about 570 MB with VGG-11.
inline fs::path GraphModelsDir() {
  return WrittenModelsDir("graph_models.py", {"tests/torch/script_models.py", "examples/gpt_kjv.py",
                                              "examples/gpt_modulelist_kjv.py"});
}

// What PyTorch (tests/torch/script_models.py check) says of a dapple run: {"max_loss_diff",
// "max_param_rel_diff", ...}.
inline nlohmann::json CheckAgainstPyTorch(const RunResult& r, const fs::path& dir,
                                          const std::string& model, const std::string& data,
                                          const std::string& exported, int steps, int gbs,
                                          int seq_len, const std::string& python_flags = "") {
  const fs::path losses = WriteLosses(r, dir / "losses.txt");
  fs::path json = dir / "check.json";
  std::string cmd = std::string(DAPPLE_PYTHON) + " " + DAPPLE_SOURCE_DIR +
                    "/tests/torch/script_models.py check " + model + " " + data + " " + exported +
                    " " + losses.string() + " --steps " + std::to_string(steps) + " --gbs " +
                    std::to_string(gbs) + " --seq-len " + std::to_string(seq_len) + " " +
                    python_flags + " > " + json.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return nlohmann::json::parse(Slurp(json), nullptr, false);
}

}  // namespace dapple::testing
