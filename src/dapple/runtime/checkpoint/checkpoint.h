// Checkpoints per layer (docs/design.md section 7), so a run can resume under a different
// plan: <dir>/step-<N>/<layer>.pt holds one layer's parameters, their optimizer state and
// the layer's buffers (a pickled dict, readable by torch.load; Note [Buffers in
// checkpoints] in checkpoint.cc); <dir>/step-<N>/meta.json the step and the run's
// identity; <dir>/latest names the newest complete checkpoint. Every file is written
// atomically (temporary file, then rename) and `latest` moves only after all layers are in.
#pragma once

#include <ATen/core/Dict.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dapple/runtime/optim/optimizer.h"

namespace dapple {

// What a layer file held when it was written (Note [Checkpoint checksums] in
// checkpoint_sums.h).
struct LayerFileSum {
  int64_t bytes = 0;
  uint32_t crc32 = 0;  // zlib's CRC-32 of the whole file
};

struct CheckpointMeta {
  int64_t step = 0;  // steps completed: training resumes at global batch `step`
  std::string model;
  std::string optimizer;  // "sgd", "adam", "adamw"
  std::string dtype;      // "float32", "float64"
  std::vector<std::string> layers;
  std::vector<double> losses;  // mean loss of every completed step, for the record
  // Setting -> value (Note [Recipes in checkpoints], recipe.h); empty in checkpoints written
  // before recipes.
  std::map<std::string, std::string> recipe;
  // Layer name -> its file's size and checksum; empty in checkpoints written before sums.
  std::map<std::string, LayerFileSum> files;
};

struct LayerState {
  std::map<std::string, torch::Tensor> params;   // parameter name -> value
  std::map<std::string, torch::Tensor> buffers;  // buffer name -> value
  bool has_buffers = false;                      // false: written before checkpoints held buffers
  std::map<std::string, std::map<std::string, torch::Tensor>> optimizer;  // name -> state
};

// A layer's checkpoint tensors copied to host memory (parameters, their optimizer state,
// buffers): what SaveLayer writes, taken apart so that a background writer can write it while
// training goes on (Note [Asynchronous checkpoints], async_checkpoint.h).
struct LayerSnapshot {
  std::string layer;
  c10::Dict<std::string, torch::Tensor> tensors;  // "param/N", "state/N/FIELD", "buffer/N"
};

// Whether a snapshot's host tensors are copies (training goes on while a writer writes them)
// or share the module's storage where it is on the host (nothing changes the values until the
// write ends: a synchronous save, or the final checkpoint of a run, whose writer is awaited
// before anything else runs). A shared snapshot spares a copy of the stage's state.
enum class SnapshotValues { kCopied, kShared };

// Layer `layer` (its module's parameters, buffers and, with `opt`, their optimizer state) on
// the host: with kCopied the clones share nothing with the module.
LayerSnapshot SnapshotLayer(const std::string& layer, torch::nn::Module& module,
                            torch::optim::Optimizer* opt, OptimizerKind kind,
                            SnapshotValues values = SnapshotValues::kCopied);
// The same with the optimizer state from `states` (null: none); with a sharded optimizer
// collective over the stage's replicas (ShardedOptimizer::Export).
LayerSnapshot SnapshotLayer(const std::string& layer, torch::nn::Module& module,
                            ParamStateStore* states,
                            SnapshotValues values = SnapshotValues::kCopied);
// Writes a snapshot as SaveLayer does, record by record as torch::jit::pickle_save lays them
// out (the same bytes), never holding the file in memory; any thread may call it. Returns
// the file's size.
int64_t WriteLayerSnapshot(const std::filesystem::path& dir, int64_t step,
                           const LayerSnapshot& snapshot);

// The folder of the checkpoint after `step` steps.
std::filesystem::path CheckpointStepDir(const std::filesystem::path& dir, int64_t step);

// Writes layer `layer` (its module's parameters and, with `opt`, their optimizer state)
// into CheckpointStepDir(dir, step), atomically and durably (fsync of the file and its
// folder). Creates the folders. Returns the file's size on disk in bytes.
int64_t SaveLayer(const std::filesystem::path& dir, int64_t step, const std::string& layer,
                  torch::nn::Module& module, torch::optim::Optimizer* opt, OptimizerKind kind);
// The file of `layer` in a step folder.
std::filesystem::path LayerFile(const std::filesystem::path& step_dir, const std::string& layer);
// Writes meta.json into the step folder, then points `latest` at it (both atomic and
// durable). Call after every layer of the step was saved and confirmed
// (VerifyWrittenLayers, checkpoint_commit.h).
void CommitCheckpoint(const std::filesystem::path& dir, const CheckpointMeta& meta);

// The newest committed checkpoint's folder, or nullopt when `dir` has none.
std::optional<std::filesystem::path> LatestCheckpoint(const std::filesystem::path& dir);
CheckpointMeta ReadCheckpointMeta(const std::filesystem::path& step_dir);
// Reads one layer file; throws InputError naming the file when missing or malformed.
LayerState ReadLayer(const std::filesystem::path& step_dir, const std::string& layer);
// Loads a layer's parameters, buffers (and, with `states`, optimizer state) into `module`.
// Throws InputError naming the file and parameter or buffer when names or shapes differ. A
// file written before checkpoints held buffers still loads: its parameters are loaded and
// the module's buffers stay as they are, with one line on stderr.
void LoadLayer(const std::filesystem::path& step_dir, const std::string& layer,
               torch::nn::Module& module, ParamStateStore* states);
// The buffer part of LoadLayer; `path` names the file in errors.
void LoadBuffers(const LayerState& st, const std::string& path, const std::string& layer,
                 torch::nn::Module& module);

}  // namespace dapple
