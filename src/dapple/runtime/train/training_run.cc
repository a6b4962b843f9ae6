// One rank's training in phases (Note [Training in phases], training_run.h).
#include "dapple/runtime/train/training_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>

#include "dapple/common/clock.h"
#include "dapple/common/error.h"
#include "dapple/common/malloc_tuning.h"
#include "dapple/common/process_memory.h"
#include "dapple/models/mixed_precision.h"
#include "dapple/runtime/checkpoint/checkpoint.h"
#include "dapple/runtime/checkpoint/checkpoint_sums.h"
#include "dapple/runtime/checkpoint/export.h"
#include "dapple/runtime/checkpoint/recipe.h"
#include "dapple/runtime/checkpoint/resume_policy.h"
#include "dapple/runtime/launch/restarts.h"
#include "dapple/runtime/train/evaluation.h"

namespace dapple {
namespace {

TrainOptions WithCheckpointDir(TrainOptions o) {
  if (!o.save_model.empty() && o.checkpoint_dir.empty())
    o.checkpoint_dir = o.save_model.string() + ".checkpoint";  // removed after the export
  return o;
}

Schedule LoweredForRanks(const Plan& plan, const RankGrid& grid, const std::string& source) {
  Schedule lowered = LowerComms(
      MakeSchedule(plan.schedule, grid.num_stages(), plan.num_micro_batches, grid.num_chunks()),
      grid.Replicas());
  if (auto err = FindScheduleError(lowered))
    throw Error(
        fmt::format("{}: schedule {} is unsound: {}", source, ToString(plan.schedule), *err));
  return lowered;
}

}  // namespace

TrainingRun::TrainingRun(const TrainOptions& options, const DistEnv& env,
                         std::optional<Model> names_only)
    : o_(WithCheckpointDir(options)),
      own_checkpoint_dir_(options.checkpoint_dir.empty()),
      env_(env),
      faults_(FaultInjector::FromEnvironment(env.rank, RestartAttempt())),
      uncaught_at_start_(std::uncaught_exceptions()),
      checked_(LoadAndCheckPlan(o_, env.world_size, std::move(names_only))),
      plan_(checked_.plan),
      grid_(plan_, env.world_size, o_.plan_path.string()),
      lowered_(LoweredForRanks(plan_, grid_, o_.plan_path.string())),
      device_(DeviceForLocalRank(o_.device, env.local_rank)) {
  UseDevice(device_);  // Note [A device per process]
  try {
    SetUpStage();
    SetUpOptimizerAndData();
    SetUpWorker();
  } catch (...) {
    (void)comm_.release();  // Note [Leak on failure]
    throw;
  }
}

TrainingRun::~TrainingRun() {
  if (std::uncaught_exceptions() > uncaught_at_start_) (void)comm_.release();
}

// The rank's stage (none when idle): its layers, the communicator and its groups, tied
// parameters and what crosses the stage's boundaries.
void TrainingRun::SetUpStage() {
  // An idle rank (the plan leaves it out) takes part in the world's collectives only: the
  // start barrier, checkpoint barriers, the trace and the summary. The per-step loss sum runs
  // over the ranks that train and rank 0 (which prints it), so that idle ranks behind a slow
  // link do not put their latency into every step.
  const StageReplica at = grid_.Of(env_.rank);
  stage_ = at.stage;
  replica_ = at.replica;
  sp_ = grid_.Idle(env_.rank) ? nullptr : &plan_.stages[stage_];
  leader_ = env_.rank == 0;
  sums_loss_ = leader_ || !grid_.Idle(env_.rank);
  resident_at_start_ = ResidentBytes();
  // Note [Stage-local models]: this rank materialises only its stage's layers (each chunk's),
  // in the model its plan check loaded.
  held_ = HeldRanges(plan_, grid_, env_.rank);
  held_layers_ = HeldLayerIndices(held_);
  chunked_ = grid_.num_chunks() > 1;  // Note [Chunks in the runtime]
  model_ = std::move(checked_.model);
  // What that load freed (its shape probe's temporaries, Note [Probing with zeros]) goes back
  // to the kernel before the stage's tensors are read, so that the freed blocks do not stay
  // resident beside them (Note [Freed memory stays]).
  ReturnFreedMemory();
  MaterializeLayers(model_, HeldLayerRange(held_));
  UseMixedPrecision(model_, o_.precision);  // before ProbeStage: bf16 boundaries
  if (!device_.is_cpu()) {
    for (auto& l : model_.layers)
      if (l.held()) l.module->to(device_);
  }
  for (int r = 0; r < env_.world_size; ++r) {
    if (grid_.Idle(r)) idle_.push_back(r);
    if (r == 0 || !grid_.Idle(r)) loss_ranks_.push_back(r);
  }
  if (leader_) {
    if (auto warning = ProfiledOptimizerMismatch(plan_, o_))
      std::fprintf(stderr, "%s\n", warning->c_str());
    if (auto warning = PlannedPrecisionMismatch(plan_, o_))
      std::fprintf(stderr, "%s\n", warning->c_str());
    if (!idle_.empty())
      std::fprintf(stderr, "dapple train: the plan uses %d of %d processes; rank%s %s idle\n",
                   grid_.num_active(), env_.world_size, idle_.size() > 1 ? "s" : "",
                   fmt::format("{}", fmt::join(idle_, ", ")).c_str());
  }
  comm_ = std::make_unique<Communicator>(env_, o_.timeout, device_);
  if (leader_ && device_.is_cuda())  // Note [Transport by device]
    std::fprintf(stderr, "dapple train: rank 0 on %s (%s); CUDA tensors over %s\n",
                 device_.str().c_str(), DeviceName(device_).c_str(),
                 TransportName(comm_->transport()));
  if (sp_ && sp_->replicas() > 1) comm_->CreateGroup(fmt::format("stage{}", stage_), sp_->devices);
  if (!idle_.empty() && sums_loss_) comm_->CreateGroup("loss", loss_ranks_);
  if (sp_) tied_.emplace(model_, plan_, grid_, stage_, *comm_);
  // What crosses this stage's boundaries (boundary.h): the previous stage's output spec
  // comes through the store, so that no rank runs another stage's layers.
  if (sp_ && !chunked_) {  // chunked: ChunkSet, per chunk
    const int S = grid_.num_stages();
    in_spec_ = stage_ == 0 ? ModelInputSpec(model_)
                           : BoundarySpecFromJson(comm_->Lookup(
                                 fmt::format("boundary{}", stage_ - 1),
                                 fmt::format("{}: waiting for stage {}'s output shapes",
                                             grid_.Describe(env_.rank), stage_ - 1)));
    out_spec_ = ProbeStage(model_, sp_->first_layer, sp_->last_layer, in_spec_, device_);
    if (replica_ == 0 && stage_ + 1 < S)
      comm_->Publish(fmt::format("boundary{}", stage_), BoundarySpecToJson(out_spec_));
  }
}

// The optimizer and clipper of the held parameters, a resumed checkpoint, and the data of
// the first and last stage.
void TrainingRun::SetUpOptimizerAndData() {
  if (sp_ && sp_->shard_optimizer) {
    sharded_ = std::make_unique<ShardedOptimizer>(
        o_.optimizer, *comm_, fmt::format("stage{}", stage_), replica_, sp_->replicas(),
        BucketedLayerParams(model_, sp_->first_layer, sp_->last_layer,
                            tied_ && !tied_->empty() ? &*tied_ : nullptr),
        sp_->first_layer, o_.bucket_bytes, HeldParameters(model_, held_));
    optimizer_ = &sharded_->optimizer();
    param_states_ = sharded_.get();
  } else if (sp_) {
    whole_ = MakeOptimizer(o_.optimizer, HeldParameters(model_, held_));
    optimizer_ = whole_.get();
    whole_states_ = std::make_unique<WholeParamStates>(*whole_, o_.optimizer.kind);
    param_states_ = whole_states_.get();
  }
  if (sp_ && o_.clip_grad_norm > 0) {
    clipper_.emplace(o_.clip_grad_norm, HeldParameters(model_, held_), grid_, env_.rank,
                     tied_ ? &*tied_ : nullptr, *comm_);
    if (sharded_) clipper_->UseShards(sharded_->ShardedParameters(), sharded_->shards());
  }
  if (o_.resume || (o_.resume_auto && DecideToResume(ResumeMode::kAuto, o_.checkpoint_dir, *comm_)))
    ResumeFromCheckpoint();
  // Note [Data a stage reads] (models/data.h): the group of the first virtual stage reads
  // the inputs, the group of the last the targets (in a V both are group 0).
  const DataParts parts{stage_ == grid_.GroupOf(0),
                        stage_ == grid_.GroupOf(grid_.num_virtual_stages() - 1)};
  if (sp_ && (parts.inputs || parts.targets)) {
    data_ = MakeDataset(o_.data, model_, o_.seed,
                        o_.data_cache_dir.empty() ? DefaultDataCacheDir() : o_.data_cache_dir,
                        o_.data_files, parts);
  }
}

// The stage worker (or the chunks of an interleaved plan), the checkpoint writer, progress,
// and the start barrier.
void TrainingRun::SetUpWorker() {
  StageWorkerOptions wo;
  wo.global_batch = plan_.global_batch_size;
  wo.micro_batch = plan_.micro_batch_size;
  wo.recompute = o_.recompute || (sp_ && plan_.Recomputes(stage_));
  if (sp_) wo.recompute_layers = plan_.stages[stage_].recompute_layers;
  wo.bucket_bytes = o_.bucket_bytes;
  wo.overlap_allreduce = plan_.allreduce_overlap && !o_.no_overlap;
  wo.timeout = o_.timeout;
  wo.faults = &faults_;
  wo.tied = tied_ && !tied_->empty() ? &*tied_ : nullptr;
  wo.clip = clipper_ ? &*clipper_ : nullptr;
  wo.sharded = sharded_.get();
  if (sp_ && chunked_) {
    chunks_.emplace(model_, plan_, grid_, env_.rank, lowered_.programs[stage_], *comm_, *optimizer_,
                    device_, wo, o_.recompute);
  } else if (sp_) {
    worker_.emplace(model_, grid_, env_.rank, lowered_.programs[stage_], in_spec_, out_spec_,
                    *comm_, *optimizer_, device_, sp_->first_layer, sp_->last_layer, wo);
  }
  writer_.emplace(*comm_, !o_.sync_checkpoints);
  progress_.emplace(o_, plan_, start_);
  // The traced steps are the last trace_steps ones; a barrier before the first lines the
  // ranks up, so that the timeline starts with every rank at the step's start.
  first_traced_ = std::max<int64_t>(start_, o_.steps - std::max(1, o_.trace_steps));
  tracing_ = !o_.trace_path.empty();
  comm_->Barrier(fmt::format("rank {}: start of training", env_.rank));
  stats_.SetPeakBeforeTraining(PeakResidentBytes());
  step_losses_.emplace(*comm_, idle_.empty() ? "" : "loss", sums_loss_, env_.rank, o_.timeout);
}

void TrainingRun::Record(std::optional<FinishedStep> done) {
  if (!done) return;
  if (!sp_) {  // an idle rank 0 runs nothing: its step is the wait for the step's loss sum
    const double now = NowMs();
    done->step_ms = now - last_sum_ms_;
    last_sum_ms_ = now;
  }
  CheckLossFinite(*done, plan_.global_batch_size, o_.data_files.shuffle, leader_);
  losses_.push_back(done->loss);
  stats_.AddStep(done->events, done->t0, done->t1, done->step_ms, done->step == start_);
  if (leader_) progress_->Step(done->step, done->loss, done->step_ms, done->grad_norm);
}

// The traced steps also show what a rank does between its schedules (category "other"):
// DATA (the next global batch), LOSS (waiting for the previous step's loss sum) and HOST
// (the rest: progress, starting this step's sum), which the simulator does not model.
void TrainingRun::TraceHostTime(const char* name, double from, double to) {
  if (sp_) traced_.push_back({env_.rank, name, "other", from, to, stage_, -1});
}

// Note [Loss off the critical path] (step_losses.h): step k's loss is summed while step k+1
// runs, and at once before a checkpoint, the trace and the end.
void TrainingRun::Step(int64_t step) {
  if (tracing_ && step == first_traced_) {
    Record(step_losses_->Finish(NowMs()));
    comm_->Barrier(fmt::format("rank {}: before the traced steps", env_.rank));
  }
  const bool traced_step = tracing_ && step >= first_traced_;
  const double d0 = NowMs();
  Batch batch = data_ ? data_->GlobalBatch(step, plan_.global_batch_size) : Batch{};
  if (optimizer_)
    SetLearningRate(*optimizer_, LearningRateAt(o_.lr_schedule, o_.optimizer.lr, step, o_.steps));
  const double t0 = NowMs();
  if (step == start_) last_sum_ms_ = t0;
  StepResult r = worker_   ? worker_->RunStep(step, batch)
                 : chunks_ ? chunks_->RunStep(step, batch)
                           : StepResult{};
  const double t1 = NowMs();
  Record(step_losses_->Finish(t0));
  const double t2 = NowMs();
  if (leader_) ReportCompletedSteps(step + 1);  // for a restart's line (Note [Restarts])
  if (traced_step) {
    traced_.insert(traced_.end(), r.events.begin(), r.events.end());
    TraceHostTime("DATA", d0, t0);
    TraceHostTime("LOSS", t1, t2);
  }
  step_losses_->Start(step, r.loss_part, clipper_ ? clipper_->ReportedPart() : 0, t0, t1,
                      std::move(r.events));
  freed_memory_.AfterStep();
  if (traced_step) TraceHostTime("HOST", t2, NowMs());
  const bool last = step + 1 == o_.steps;
  const bool due = !o_.checkpoint_dir.empty() &&
                   (last || (o_.checkpoint_every > 0 && (step + 1) % o_.checkpoint_every == 0));
  if (due || last) Record(step_losses_->Finish(NowMs()));
  if (due) SaveCheckpoint(step + 1);
  if (tracing_ && last) WriteMeasuredTrace(*comm_, grid_, plan_, o_, traced_);
}

void TrainingRun::Finish() {
  writer_->Wait();  // the final checkpoint is committed before the summary and the export
  if (worker_) stats_.SetPeaks(worker_->peak_live_micro_batches(), worker_->peak_live_bytes());
  if (chunks_) stats_.SetPeaks(chunks_->peak_live_micro_batches(), chunks_->peak_live_bytes());
  stats_.SetDataBytes(data_ ? data_->HeldBytes() : 0);
  stats_.SetDeviceMemory(PeakDeviceMemory(device_));  // Note [Memory as a GPU holds it]
  stats_.SetMemory(Bytes(HeldParameters(model_, held_)),
                   optimizer_ ? OptimizerStateBytes(*optimizer_, o_.optimizer.kind) : 0,
                   PeakResidentBytes(), resident_at_start_);
  faults_.AfterTraining(o_.steps);
  MeasuredRun measured = GatherAndPrintSummary(*comm_, grid_, plan_, o_, stats_, losses_, start_);
  if (!o_.save_model.empty() && leader_) {
    ExportScriptModel(o_.model, CheckpointStepDir(o_.checkpoint_dir, o_.steps), o_.save_model);
    if (o_.log_json) {
      std::printf("%s\n", nlohmann::json{{"saved_model", o_.save_model}}.dump().c_str());
    } else {
      std::printf("wrote the trained model to %s\n", o_.save_model.c_str());
    }
  }
  if (o_.evaluate) Evaluate();
  // Every rank's files were in before the final commit (its writers' confirmations).
  if (!o_.save_model.empty() && own_checkpoint_dir_ && leader_)
    std::filesystem::remove_all(o_.checkpoint_dir);
  if (leader_) PrintPredictedVsMeasured(plan_, o_, measured);
}

// Saves this rank's layers (none on an idle rank) when it is replica 0 of its stage; rank 0
// commits. Note [Asynchronous checkpoints]: waits for the previous save, takes the tensors,
// and leaves the rest to the writer.
void TrainingRun::SaveCheckpoint(int64_t steps_done) {
  writer_->Wait();
  CheckpointJob job;
  job.dir = o_.checkpoint_dir;
  job.step = steps_done;
  // A sharded stage's replicas all take part in assembling the state (Note [Optimizer
  // sharding]); replica 0 keeps it.
  // The final checkpoint's writer is awaited before anything changes the values (Finish).
  const SnapshotValues values = o_.sync_checkpoints || steps_done == o_.steps
                                    ? SnapshotValues::kShared
                                    : SnapshotValues::kCopied;
  if (replica_ == 0 || sharded_) {
    for (int l : held_layers_) {
      LayerSnapshot snapshot =
          SnapshotLayer(model_.layers[l].name, *model_.layers[l].module, param_states_, values);
      if (replica_ == 0) job.layers.push_back(std::move(snapshot));
    }
  }
  job.die_after_first_layer = faults_.DiesInSave(steps_done);
  if (leader_) {
    job.meta.emplace();
    job.meta->step = steps_done;
    job.meta->model = o_.model;
    job.meta->optimizer = ToString(o_.optimizer.kind);
    job.meta->dtype = o_.dtype == torch::kFloat64 ? "float64" : "float32";
    job.meta->layers = LayerNames(model_);
    job.meta->losses = losses_;
    job.meta->recipe =
        RecipeOf(o_.optimizer, o_.lr_schedule, o_.clip_grad_norm, o_.steps, o_.precision);
  }
  job.keep_checkpoints = o_.keep_checkpoints;
  writer_->Start(std::move(job));
}

// Loads this rank's layers (none on an idle rank) from the newest checkpoint, and the steps
// and losses it ends with.
void TrainingRun::ResumeFromCheckpoint() {
  // Note [Checkpoint checksums]: the newest intact checkpoint, as rank 0 sees it.
  const std::filesystem::path latest = AgreeOnCheckpoint(o_.checkpoint_dir, *comm_);
  CheckpointMeta meta = ReadCheckpointMeta(latest);
  const std::string where = (latest / "meta.json").string();
  if (meta.model != o_.model) ThrowInput("{}: model is {}, not {}", where, meta.model, o_.model);
  if (meta.layers != LayerNames(model_)) {
    ThrowInput("{}: layers [{}] differ from model {}'s [{}]", where, FewNames(meta.layers),
               o_.model, FewNames(LayerNames(model_)));
  }
  if (meta.optimizer != ToString(o_.optimizer.kind)) {
    ThrowInput("{}: optimizer is {}, not {} (pass --optimizer {})", where, meta.optimizer,
               ToString(o_.optimizer.kind), meta.optimizer);
  }
  auto change = CompareRecipes(
      meta.recipe,
      RecipeOf(o_.optimizer, o_.lr_schedule, o_.clip_grad_norm, o_.steps, o_.precision), where);
  if (change && leader_) std::fprintf(stderr, "%s\n", change->c_str());
  if (!held_layers_.empty()) {
    std::vector<std::string> own;
    for (int l : held_layers_) own.push_back(model_.layers[l].name);
    if (std::string why = CheckLayerFiles(latest, meta, own); !why.empty())
      ThrowInput("{}", why);  // damaged after rank 0 checked it, or not visible to rank 0
    for (int l : held_layers_)
      LoadLayer(latest, model_.layers[l].name, *model_.layers[l].module, param_states_);
  }
  start_ = meta.step;
  losses_ = meta.losses;
}

void TrainingRun::Evaluate() {
  std::vector<HeldStage> held_stages;  // in (virtual) stage order
  if (sp_ && chunked_) {
    for (int c = 0; c < grid_.num_chunks(); ++c)
      held_stages.push_back(
          {grid_.VirtualStage(stage_, c), held_[c].first, held_[c].second, chunks_->input(c)});
  } else if (sp_) {
    held_stages.push_back({stage_, sp_->first_layer, sp_->last_layer, in_spec_});
  }
  EvaluateTrainedStages(o_, model_, grid_, env_.rank, held_stages, data_.get(), device_, *comm_);
}

}  // namespace dapple
