// Checkpoints per layer (docs/design.md section 7), so a run can resume under a different plan:
// <dir>/step-<N>/<layer>.pt holds one layer's parameters and their optimizer state (a
// pickled dict, readable by torch.load); <dir>/step-<N>/meta.json the step and the run's
// identity; <dir>/latest names the newest complete checkpoint. Every file is written
// atomically (temporary file, then rename) and `latest` moves only after all layers are in.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dapple/runtime/optimizer.h"

namespace dapple {

struct CheckpointMeta {
  int64_t step = 0;  // steps completed: training resumes at global batch `step`
  std::string model;
  std::string optimizer;  // "sgd", "adam", "adamw"
  std::string dtype;      // "float32", "float64"
  std::vector<std::string> layers;
  std::vector<double> losses;  // mean loss of every completed step, for the record
};

struct LayerState {
  std::map<std::string, torch::Tensor> params;                            // parameter name -> value
  std::map<std::string, std::map<std::string, torch::Tensor>> optimizer;  // name -> state
};

// The folder of the checkpoint after `step` steps.
std::filesystem::path CheckpointStepDir(const std::filesystem::path& dir, int64_t step);

// Writes layer `layer` (its module's parameters and, with `opt`, their optimizer state)
// into CheckpointStepDir(dir, step), atomically. Creates the folders.
void SaveLayer(const std::filesystem::path& dir, int64_t step, const std::string& layer,
               torch::nn::Module& module, torch::optim::Optimizer* opt, OptimizerKind kind);
// Writes meta.json into the step folder, then points `latest` at it (both atomic). Call
// after every layer of the step was saved.
void CommitCheckpoint(const std::filesystem::path& dir, const CheckpointMeta& meta);

// The newest committed checkpoint's folder, or nullopt when `dir` has none.
std::optional<std::filesystem::path> LatestCheckpoint(const std::filesystem::path& dir);
CheckpointMeta ReadCheckpointMeta(const std::filesystem::path& step_dir);
// Reads one layer file; throws InputError naming the file when missing or malformed.
LayerState ReadLayer(const std::filesystem::path& step_dir, const std::string& layer);
// Loads a layer's parameters (and, with `opt`, optimizer state) into `module`. Throws
// InputError naming the file and parameter when names or shapes differ.
void LoadLayer(const std::filesystem::path& step_dir, const std::string& layer,
               torch::nn::Module& module, torch::optim::Optimizer* opt, OptimizerKind kind);

}  // namespace dapple
