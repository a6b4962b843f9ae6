// The options of `dapple train` and the entry to training under a plan (docs/design.md
// section 7): TrainOptions, the checks of a plan against the model it trains
// (LoadAndCheckPlan), and RunTraining, which runs one rank's TrainingRun (training_run.h, the
// run itself in phases: set-up, steps with progress, checkpoints and a measured trace, and the
// closing summary printed by rank 0). One process per device builds the model, takes its
// stage's layers and rendezvouses with the others.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dapple/format/plan.h"
#include "dapple/models/data.h"
#include "dapple/models/model.h"
#include "dapple/models/model_source.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/optim/lr_schedule.h"
#include "dapple/runtime/optim/optimizer.h"

namespace dapple {

struct TrainOptions {
  std::string model;  // zoo name or TorchScript file (models/model_source.h)
  ModelOptions model_options;
  ScriptModelOptions script;   // TorchScript models: loss, input sample
  DataFileOptions data_files;  // --data PATH: --seq-len, --no-shuffle, --eval-data
  std::filesystem::path plan_path;
  // Set: the plan itself, made in memory (`--elastic` on fewer processes than plan_path's
  // plan needs); plan_path then only names it in messages.
  std::optional<Plan> plan;
  int64_t steps = 1;  // total steps: a resumed run continues up to this many
  std::string data = "synthetic";
  std::filesystem::path data_cache_dir;  // empty: DefaultDataCacheDir()
  OptimizerOptions optimizer;
  LrSchedule lr_schedule;  // the rate of each step from optimizer.lr (lr_schedule.h)
  // > 0: the global gradient norm is clipped to it every step and reported (Note [Global
  // gradient clipping], grad_clipping.h); infinite: reported only. 0: neither.
  double clip_grad_norm = 0;
  uint64_t seed = 0;
  torch::Dtype dtype = torch::kFloat32;  // of the parameters (the master weights)
  // Compute precision (Note [Mixed precision] in models/mixed_precision.h); kBf16 requires
  // dtype float32.
  Precision precision = Precision::kFloat32;
  std::filesystem::path checkpoint_dir;  // empty: no checkpoints
  // TorchScript models: after training, rank 0 writes the module with the trained weights
  // here (through a final checkpoint; a temporary one without checkpoint_dir).
  std::filesystem::path save_model;
  int64_t checkpoint_every = 0;  // steps; 0: only at the end when a dir is given
  int keep_checkpoints = 0;      // newest committed checkpoints kept; 0: all
  // Write checkpoints in the training thread (the step stalls for the whole save) instead
  // of a background writer (Note [Asynchronous checkpoints], async_checkpoint.h).
  bool sync_checkpoints = false;
  bool resume = false;
  bool resume_auto = false;  // --resume auto: resume when a checkpoint exists (resume_policy.h)
  bool recompute = false;    // every stage; else the plan says per stage
  // Every stage with more than one replica shards its optimizer state (Note [Optimizer
  // sharding]); else the plan says per stage.
  bool shard_optimizer = false;
  std::filesystem::path trace_path;  // empty: no trace
  int trace_steps = 1;               // the last this many steps go into the trace
  bool log_json = false;
  bool quiet = false;     // no per-step lines (the summary is still printed)
  int64_t log_every = 0;  // progress lines off a terminal every this many steps; 0: LogEvery
  // After training, the held-out loss (accuracy for classes, perplexity for language
  // models) of the trained stages, run through the pipeline (runtime/train/evaluation.h).
  bool evaluate = false;
  int64_t eval_samples = 0;  // at most this many held-out samples; 0: all
  std::chrono::milliseconds timeout{60000};
  // Each process's compute device (Note [A device per process], device.h).
  DeviceChoice device = DeviceChoice::kCpu;
  int64_t bucket_bytes = 25 << 20;
  // One allreduce after the last backward even when the plan's allreduce_overlap is true.
  bool no_overlap = false;
};

// A plan read and checked against a model: layer ids are the model's layer names.
struct CheckedPlan {
  Plan plan;
  // No layer held; a rank materialises its stage's layers in it (Note [Stage-local models]
  // in models/model.h).
  Model model;
};

// The model source of the options.
ModelSource SourceOf(const TrainOptions& options);

// Reads options.plan_path (or takes options.plan) and checks that the plan's layers are the
// model's (by layer id = layer name, and the layer count) and that the plan uses exactly
// `world_size` devices. The model is `names_only`, loaded from the options' source with no
// layer held, or, when not given, loaded so here. Throws InputError with one line naming the
// plan and the mismatch.
CheckedPlan LoadAndCheckPlan(const TrainOptions& options, int world_size,
                             std::optional<Model> names_only = std::nullopt);

// Runs training as rank env.rank of env.world_size (collective: every rank calls it): the
// phases of a TrainingRun (training_run.h) in a row. `names_only`: the model as
// LoadAndCheckPlan takes it, when the caller has loaded it already (the rank loads its model
// once). Throws InputError for bad input, CommError when a peer fails or stops answering.
void RunTraining(const TrainOptions& options, const DistEnv& env,
                 std::optional<Model> names_only = std::nullopt);

// The names of the model's layers, in order; a few of `names` for a message.
std::vector<std::string> LayerNames(const Model& model);
std::string FewNames(const std::vector<std::string>& names);

}  // namespace dapple
