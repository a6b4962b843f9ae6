// Note [Training in phases]
// One rank's part of `dapple train` as three phases, so that the step reads as the schedule
// it runs: set-up (the constructor: plan, model stage, communicator, optimizer, resume, data,
// the stage worker), Step (the next global batch through the rank's instruction list, then
// its loss, checkpoint and trace), and Finish (summary, export, evaluation). RunTraining
// (train_options.h, beside the options and their checks) is the three in a row; everything
// a step needs is a member.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "dapple/common/malloc_tuning.h"
#include "dapple/models/data.h"
#include "dapple/runtime/checkpoint/async_checkpoint.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/rank_grid.h"
#include "dapple/runtime/comm/tied_parameters.h"
#include "dapple/runtime/optim/grad_clipping.h"
#include "dapple/runtime/optim/optimizer.h"
#include "dapple/runtime/optim/sharded_optimizer.h"
#include "dapple/runtime/train/step_losses.h"
#include "dapple/runtime/train/train_options.h"
#include "dapple/runtime/train/train_report.h"
#include "dapple/runtime/worker/boundary.h"
#include "dapple/runtime/worker/chunk_set.h"
#include "dapple/runtime/worker/fault_injector.h"
#include "dapple/runtime/worker/stage_worker.h"
#include "dapple/schedule/schedule.h"

namespace dapple {

class TrainingRun {
 public:
  // Set-up; collective (every rank of env constructs one). `names_only`: the model loaded
  // with no layer held, if the caller has it (LoadAndCheckPlan); the rank materialises its
  // stage in it. Throws InputError for bad input, CommError when a peer fails.
  TrainingRun(const TrainOptions& options, const DistEnv& env,
              std::optional<Model> names_only = std::nullopt);
  // Note [Leak on failure]: leaves the communicator undestroyed when an exception is on its
  // way out (the process is about to exit).
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // The first step to run: 0, or the step a resumed checkpoint ends.
  int64_t first_step() const { return start_; }
  // Runs step `step` (first_step() <= step < options.steps, in order).
  void Step(int64_t step);
  // After the last step: the final checkpoint committed, the summary, export, evaluation.
  void Finish();

 private:
  void SetUpStage();
  void SetUpOptimizerAndData();
  void SetUpWorker();
  void Record(std::optional<FinishedStep> done);
  void TraceHostTime(const char* name, double from, double to);
  void SaveCheckpoint(int64_t steps_done);
  void ResumeFromCheckpoint();
  void Evaluate();

  TrainOptions o_;
  const bool own_checkpoint_dir_;  // a temporary checkpoint folder for --save-model
  DistEnv env_;
  FaultInjector faults_;
  int uncaught_at_start_;
  CheckedPlan checked_;  // its model moves to model_ (SetUpStage)
  const Plan& plan_;
  RankGrid grid_;
  Schedule lowered_;
  int stage_ = -1, replica_ = -1;
  const StagePlan* sp_ = nullptr;  // null on an idle rank
  int64_t resident_at_start_ = 0;  // Note [Memory above the start]
  std::vector<std::pair<int, int>> held_;
  std::vector<int> held_layers_;
  bool chunked_ = false;
  torch::Device device_;
  Model model_;
  std::vector<int> idle_, loss_ranks_;
  bool leader_ = false;
  bool sums_loss_ = false;  // rank 0 and the ranks that train sum each step's loss
  // Declared before every member that refers to it, so that those are destroyed first.
  std::unique_ptr<Communicator> comm_;
  std::optional<TiedParameters> tied_;
  BoundarySpec in_spec_, out_spec_;
  // The optimizer: whole on every replica, or sharded (Note [Optimizer sharding]);
  // optimizer_ is the one of the two that steps, param_states_ what checkpoints save and load.
  std::unique_ptr<torch::optim::Optimizer> whole_;
  std::unique_ptr<ShardedOptimizer> sharded_;
  torch::optim::Optimizer* optimizer_ = nullptr;
  std::unique_ptr<ParamStateStore> whole_states_;
  ParamStateStore* param_states_ = nullptr;
  std::optional<GradClipper> clipper_;  // Note [Global gradient clipping]
  int64_t start_ = 0;
  // An idle rank's steps: the arrivals of the loss sums (Record); the previous one's time.
  double last_sum_ms_ = 0;
  std::vector<double> losses_;
  std::unique_ptr<Dataset> data_;
  std::optional<StageWorker> worker_;
  std::optional<ChunkSet> chunks_;
  std::optional<CheckpointWriter> writer_;
  std::optional<ProgressPrinter> progress_;
  RunStats stats_;
  int64_t first_traced_ = 0;
  bool tracing_ = false;
  std::vector<TimelineEvent> traced_;
  std::optional<StepLosses> step_losses_;  // Note [Loss off the critical path]
  FreedMemoryBound freed_memory_{
      kTrainingFreedMemorySlackBytes};  // Note [Freed memory between steps]
};

}  // namespace dapple
