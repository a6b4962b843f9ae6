// Helpers of the `dapple train` tests: write a plan, run the built binary (several local
// processes through --nproc), read its JSON log lines and its per-layer checkpoints.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "dapple/models/model.h"
#include "dapple/runtime/checkpoint/checkpoint.h"

namespace dapple::testing {

namespace fs = std::filesystem;

// The small model of the tests: fc0, fc1, fc2, head (4 layers) on 8 inputs, 4 classes.
inline const char* kMlpFlags =
    "--model mlp --opt input=8 --opt hidden=6 --opt layers=3 --opt classes=4";
inline const std::vector<std::string> kMlpLayers = {"fc0", "fc1", "fc2", "head"};

struct StageSpec {
  std::string first, last;  // layer ids (names)
  std::vector<int> devices;
};

inline std::string PlanJson(const std::vector<StageSpec>& stages, int m, int M,
                            const std::string& schedule) {
  nlohmann::json j = {{"format", "dapple-plan/1"},  {"planner", "hand"},
                      {"global_batch_size", m * M}, {"micro_batch_size", m},
                      {"num_micro_batches", M},     {"schedule", schedule}};
  for (const auto& s : stages) {
    j["stages"].push_back(
        {{"first_layer_id", s.first}, {"last_layer_id", s.last}, {"devices", s.devices}});
  }
  return j.dump(2);
}

// Removes `d` when the test process exits: reference runs are cached per process and
// outlive the test that made them.
inline void RemoveAtExit(const fs::path& d) {
  static struct Cleaner {
    std::vector<fs::path> dirs;
    ~Cleaner() {
      std::error_code ec;
      for (const auto& p : dirs) fs::remove_all(p, ec);
    }
  } cleaner;
  cleaner.dirs.push_back(d);
}

// A fresh empty folder for one test, removed when the process exits.
inline fs::path TestDir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("dapple_train_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  RemoveAtExit(d);
  return d;
}

inline fs::path WritePlan(const fs::path& dir, const std::string& name, const std::string& json) {
  fs::path p = dir / (name + ".json");
  std::ofstream(p) << json;
  return p;
}

struct RunResult {
  int exit_code = -1;
  std::string out, err;
  std::vector<nlohmann::json> lines;  // stdout lines that are JSON objects
  std::vector<double> Losses() const {
    std::vector<double> l;
    for (const auto& j : lines)
      if (j.contains("loss")) l.push_back(j["loss"].get<double>());
    return l;
  }
  nlohmann::json Summary() const {
    for (const auto& j : lines)
      if (j.contains("summary")) return j["summary"];
    return {};
  }
  // The "eval" object of the --eval line; null when there is none.
  nlohmann::json Eval() const {
    for (const auto& j : lines)
      if (j.contains("eval")) return j["eval"];
    return {};
  }
};

inline std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `dapple <args>` with `env` prepended (e.g. "DAPPLE_TEST_DIE_AT=1:1").
inline RunResult RunDapple(const std::string& args, const fs::path& dir,
                           const std::string& env = "") {
  fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  std::string cmd = env + " " + DAPPLE_BINARY + std::string(" ") + args + " >" + out.string() +
                    " 2>" + err.string();
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = Slurp(out);
  r.err = Slurp(err);
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    r.lines.push_back(nlohmann::json::parse(line, nullptr, false));
  }
  return r;
}

// Exit code 2 and one line on stderr holding every one of `words` (bad input).
inline void ExpectOneErrorLine(const RunResult& r, const std::vector<std::string>& words) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  std::string err = r.err;
  while (!err.empty() && err.back() == '\n') err.pop_back();
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  for (const auto& w : words)
    EXPECT_NE(err.find(w), std::string::npos) << "'" << w << "' in: " << err;
}

// Writes `r`'s per-step losses to `file`, one per line at full precision (for a reference
// script to compare against); returns `file`.
inline fs::path WriteLosses(const RunResult& r, const fs::path& file) {
  std::ofstream out(file);
  out.precision(17);
  for (double l : r.Losses()) out << l << "\n";
  return file;
}

// Largest |a-b| / max(|b|, 1e-12) over every parameter of every layer of two checkpoints.
inline double MaxRelativeDifference(const fs::path& a, const fs::path& b,
                                    const std::vector<std::string>& layers) {
  double worst = 0;
  for (const auto& layer : layers) {
    LayerState x = ReadLayer(a, layer), y = ReadLayer(b, layer);
    EXPECT_EQ(x.params.size(), y.params.size()) << layer;
    for (const auto& [name, t] : y.params) {
      auto it = x.params.find(name);
      if (it == x.params.end()) {
        ADD_FAILURE() << layer << ": no parameter " << name;
        return 1e300;
      }
      double diff = (it->second - t).abs().max().item<double>();
      double scale = std::max(t.abs().max().item<double>(), 1e-12);
      worst = std::max(worst, diff / scale);
    }
  }
  return worst;
}

// Largest relative change of any parameter of the checkpoint in `step_dir` from its initial
// value: model `name` with `options` built in float64 from `seed` (non-vacuous comparisons).
inline double DistanceFromInitial(const std::string& name, const ModelOptions& options,
                                  uint64_t seed, const fs::path& step_dir) {
  Model init = BuildModel(name, options, seed, torch::kFloat64);
  double worst = 0;
  for (auto& layer : init.layers) {
    LayerState st = ReadLayer(step_dir, layer.name);
    for (const auto& item : layer.module->named_parameters()) {
      torch::Tensor diff = (st.params.at(item.key()) - item.value()).abs().max();
      worst = std::max(
          worst, diff.item<double>() / std::max(item.value().abs().max().item<double>(), 1e-12));
    }
  }
  return worst;
}

// Largest |a-b| over every buffer of every layer of two checkpoints (running statistics);
// a buffer missing from either is a failure.
inline double MaxBufferDifference(const fs::path& a, const fs::path& b,
                                  const std::vector<std::string>& layers) {
  double worst = 0;
  for (const auto& layer : layers) {
    LayerState x = ReadLayer(a, layer), y = ReadLayer(b, layer);
    EXPECT_EQ(x.buffers.size(), y.buffers.size()) << layer;
    for (const auto& [name, t] : y.buffers) {
      auto it = x.buffers.find(name);
      if (it == x.buffers.end()) {
        ADD_FAILURE() << layer << ": no buffer " << name;
        return 1e300;
      }
      worst = std::max(
          worst,
          (it->second.to(torch::kFloat64) - t.to(torch::kFloat64)).abs().max().item<double>());
    }
  }
  return worst;
}

}  // namespace dapple::testing
