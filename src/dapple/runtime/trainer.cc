// RunTraining: plan and model checks, setup of one stage replica, the step loop.
#include "dapple/runtime/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "dapple/common/clock.h"
#include "dapple/common/error.h"
#include "dapple/common/json_util.h"
#include "dapple/common/malloc_tuning.h"
#include "dapple/common/process_memory.h"
#include "dapple/format/cluster.h"
#include "dapple/format/message_tags.h"
#include "dapple/models/data.h"
#include "dapple/runtime/async_checkpoint.h"
#include "dapple/runtime/boundary.h"
#include "dapple/runtime/checkpoint.h"
#include "dapple/runtime/checkpoint_sums.h"
#include "dapple/runtime/chunk_set.h"
#include "dapple/runtime/evaluation.h"
#include "dapple/runtime/export.h"
#include "dapple/runtime/grad_clipping.h"
#include "dapple/runtime/rank_grid.h"
#include "dapple/runtime/recipe.h"
#include "dapple/runtime/restarts.h"
#include "dapple/runtime/resume_policy.h"
#include "dapple/runtime/stage_worker.h"
#include "dapple/runtime/step_losses.h"
#include "dapple/runtime/tied_parameters.h"
#include "dapple/runtime/train_report.h"
#include "dapple/schedule/schedule.h"

namespace dapple {
namespace {

std::string DtypeName(torch::Dtype d) { return d == torch::kFloat64 ? "float64" : "float32"; }

std::vector<std::string> LayerNames(const Model& m) {
  std::vector<std::string> names;
  for (const auto& l : m.layers) names.push_back(l.name);
  return names;
}

std::string FewNames(const std::vector<std::string>& names) {
  if (names.size() <= 6) return fmt::format("{}", fmt::join(names, ", "));
  return fmt::format("{}, {}, {}, ..., {}", names[0], names[1], names[2], names.back());
}

// Saves this rank's layers (`layers`; none on an idle rank) when it is replica 0 of its stage;
// rank 0 commits. Note [Asynchronous checkpoints]: waits for the previous save, copies the
// tensors, and leaves the rest to `writer`.
void SaveCheckpoint(const TrainOptions& o, Model& model, const std::vector<int>& layers,
                    int replica, torch::optim::Optimizer* opt, int rank, CheckpointWriter& writer,
                    int64_t steps_done, const std::vector<double>& losses) {
  writer.Wait();
  CheckpointJob job;
  job.dir = o.checkpoint_dir;
  job.step = steps_done;
  if (replica == 0) {
    for (int l : layers)
      job.layers.push_back(
          SnapshotLayer(model.layers[l].name, *model.layers[l].module, opt, o.optimizer.kind));
  }
  job.die_after_first_layer = o.die_in_save_rank == rank && o.die_in_save_steps == steps_done;
  if (rank == 0) {
    job.meta.emplace();
    job.meta->step = steps_done;
    job.meta->model = o.model;
    job.meta->optimizer = ToString(o.optimizer.kind);
    job.meta->dtype = DtypeName(o.dtype);
    job.meta->layers = LayerNames(model);
    job.meta->losses = losses;
    job.meta->recipe = RecipeOf(o.optimizer, o.lr_schedule, o.clip_grad_norm, o.steps);
  }
  job.keep_checkpoints = o.keep_checkpoints;
  writer.Start(std::move(job));
}

// Loads this rank's layers (`layers`; none on an idle rank) from the newest checkpoint;
// returns its meta.
CheckpointMeta Resume(const TrainOptions& o, Model& model, const std::vector<int>& layers,
                      torch::optim::Optimizer* opt, Communicator& comm) {
  // Note [Checkpoint checksums]: the newest intact checkpoint, as rank 0 sees it.
  const std::filesystem::path latest = AgreeOnCheckpoint(o.checkpoint_dir, comm);
  CheckpointMeta meta = ReadCheckpointMeta(latest);
  std::string where = (latest / "meta.json").string();
  if (meta.model != o.model) ThrowInput("{}: model is {}, not {}", where, meta.model, o.model);
  if (meta.layers != LayerNames(model)) {
    ThrowInput("{}: layers [{}] differ from model {}'s [{}]", where, FewNames(meta.layers), o.model,
               FewNames(LayerNames(model)));
  }
  if (meta.optimizer != ToString(o.optimizer.kind)) {
    ThrowInput("{}: optimizer is {}, not {} (pass --optimizer {})", where, meta.optimizer,
               ToString(o.optimizer.kind), meta.optimizer);
  }
  auto change = CompareRecipes(
      meta.recipe, RecipeOf(o.optimizer, o.lr_schedule, o.clip_grad_norm, o.steps), where);
  if (change && comm.rank() == 0) std::fprintf(stderr, "%s\n", change->c_str());
  if (!layers.empty()) {
    std::vector<std::string> own;
    for (int l : layers) own.push_back(model.layers[l].name);
    if (std::string why = CheckLayerFiles(latest, meta, own); !why.empty())
      ThrowInput("{}", why);  // damaged after rank 0 checked it, or not visible to rank 0
    for (int l : layers) {
      LoadLayer(latest, model.layers[l].name, *model.layers[l].module, opt, o.optimizer.kind);
    }
  }
  return meta;
}

}  // namespace

ModelSource SourceOf(const TrainOptions& o) { return {o.model, o.model_options, o.script}; }

CheckedPlan LoadAndCheckPlan(const TrainOptions& o, int world_size) {
  const std::string source = o.plan_path.string();
  CheckedPlan c{o.plan ? *o.plan : ReadPlanJson(o.plan_path),
                LoadModel(SourceOf(o), o.seed, o.dtype, kNoLayers)};
  Plan& plan = c.plan;
  if (plan.num_devices() > world_size) {
    ThrowInput("{}: the plan uses {} devices but the job has {} processes (--nproc or WORLD_SIZE)",
               source, plan.num_devices(), world_size);
  }
  // The model's layer names are the layer ids of its profile (`dapple profile`).
  Profile names;
  names.model = o.model;
  names.batch_size = 1;
  for (const auto& l : c.model.layers) {
    LayerProfile named;
    named.id = named.name = l.name;
    names.layers.push_back(std::move(named));
  }
  const int n = names.num_layers();
  for (int s = 0; s < plan.num_stages(); ++s) {
    const StagePlan& st = plan.stages[s];
    for (const std::string* id : {&st.first_layer_id, &st.last_layer_id}) {
      if (!id->empty() && names.IndexOf(*id) < 0) {
        ThrowInput("{}: stages[{}]: layer id '{}' is not a layer of model {} ({} layers: {})",
                   source, s, *id, o.model, n, FewNames(LayerNames(c.model)));
      }
    }
    for (auto [id, index] : {std::pair{&st.first_layer_id, st.first_layer},
                             std::pair{&st.last_layer_id, st.last_layer}}) {
      if (id->empty() && (index < 0 || index >= n)) {
        ThrowInput(
            "{}: stages[{}]: layer {} is not a layer of model {}, which has {} layers; was "
            "the plan made for another model or model options?",
            source, s, index, o.model, n);
      }
    }
  }
  ResolvePlanLayers(plan, names, source);
  // After the layer ids are resolved: the check reads the chunks' layer ranges.
  if (auto why = ChunkedPlanError(plan, c.model)) ThrowInput("{}: {}", source, *why);
  if (plan.stages.back().last_layer != n - 1) {
    ThrowInput(
        "{}: the plan's stages end at layer {} ('{}') but model {} has {} layers (last: "
        "'{}'); was the plan made for another model or model options?",
        source, plan.stages.back().last_layer, plan.stages.back().last_layer_id, o.model, n,
        names.layers.back().id);
  }
  Cluster job;
  job.name = "job";
  job.servers = {ServerSpec{world_size, std::nullopt}};
  ValidatePlan(plan, names, job, source);
  if (auto why = MessageTagError(plan, world_size)) ThrowInput("{}: {}", source, *why);
  return c;
}

void ApplyTestHooksFromEnvironment(TrainOptions& o) {
  // DAPPLE_TEST_CHAOS="rank:step[:save],...": entry k kills on start k of a restarted job
  // (Note [Restarts]): that rank dies mid-step `step` (0-based), or with ":save" while saving
  // the checkpoint after `step` steps.
  if (const char* v = std::getenv("DAPPLE_TEST_CHAOS"); v && *v) {
    std::string all = v;
    const int attempt = RestartAttempt();
    size_t begin = 0;
    for (int k = 0; begin <= all.size(); ++k) {
      size_t end = all.find(',', begin);
      if (end == std::string::npos) end = all.size();
      if (k == attempt) {
        const std::string entry = all.substr(begin, end - begin);
        int rank = -1;
        long long step = -1;
        if (std::sscanf(entry.c_str(), "%d:%lld", &rank, &step) != 2)
          ThrowInput("DAPPLE_TEST_CHAOS={}: expected rank:step[:save],...", v);
        const bool save = entry.size() > 5 && entry.compare(entry.size() - 5, 5, ":save") == 0;
        (save ? o.die_in_save_rank : o.die_at_rank) = rank;
        (save ? o.die_in_save_steps : o.die_at_step) = step;
      }
      begin = end + 1;
    }
  }
  if (const char* v = std::getenv("DAPPLE_TEST_DIE_IN_SAVE"); v && *v) {
    long long steps = -1;
    if (std::sscanf(v, "%d:%lld", &o.die_in_save_rank, &steps) != 2)
      ThrowInput("DAPPLE_TEST_DIE_IN_SAVE={}: expected rank:steps", v);
    o.die_in_save_steps = steps;
  }
  const char* v = std::getenv("DAPPLE_TEST_DIE_AT");
  if (v == nullptr || *v == '\0') return;
  int rank = -1, attempts = 1;
  long long step = -1;
  if (std::sscanf(v, "%d:%lld:%d", &rank, &step, &attempts) < 2) {
    ThrowInput("DAPPLE_TEST_DIE_AT={}: expected rank:step[:attempts]", v);
  }
  // The first `attempts` starts only: a restarted job (Note [Restarts]) would otherwise die
  // again and again.
  if (RestartAttempt() >= attempts) return;
  o.die_at_rank = rank;
  o.die_at_step = step;
}

void RunTraining(const TrainOptions& options, const DistEnv& env) {
  TrainOptions o = options;
  if (!o.save_model.empty() && o.checkpoint_dir.empty()) {
    o.checkpoint_dir = o.save_model.string() + ".checkpoint";  // removed after the export
  }
  CheckedPlan checked = LoadAndCheckPlan(o, env.world_size);
  const Plan& plan = checked.plan;
  const std::string source = o.plan_path.string();
  torch::Device device = DeviceForLocalRank(env.local_rank);
  RankGrid grid(plan, env.world_size, source);
  // S: device groups (stages, or the groups of an interleaved plan's chunks).
  const int S = grid.num_stages(), M = plan.num_micro_batches;
  Schedule lowered =
      LowerComms(MakeSchedule(plan.schedule, S, M, grid.num_chunks()), grid.Replicas());
  if (auto err = FindScheduleError(lowered)) {
    throw Error(
        fmt::format("{}: schedule {} is unsound: {}", source, ToString(plan.schedule), *err));
  }
  // An idle rank (the plan leaves it out) takes part in the world's collectives only: the
  // start barrier, checkpoint barriers, the trace and the summary. The per-step loss sum runs
  // over the ranks that train and rank 0 (which prints it), so that idle ranks behind a slow
  // link do not put their latency into every step.
  const auto [stage, replica] = grid.Of(env.rank);
  const StagePlan* sp = grid.Idle(env.rank) ? nullptr : &plan.stages[stage];
  // Note [Memory above the start] (train_report.h): what the process holds before its stage.
  const int64_t resident_at_start = ResidentBytes();
  // Note [Stage-local models]: this rank builds only its stage's layers (each chunk's).
  const std::vector<std::pair<int, int>> held = HeldRanges(plan, grid, env.rank);
  const std::vector<int> held_layers = HeldLayerIndices(held);
  const bool chunked = grid.num_chunks() > 1;  // Note [Chunks in the runtime]
  Model model = LoadModel(SourceOf(o), o.seed, o.dtype, HeldLayerRange(held));
  if (!device.is_cpu()) {
    for (auto& l : model.layers)
      if (l.held()) l.module->to(device);
  }
  std::vector<int> idle, loss_ranks;  // loss_ranks: rank 0 and the ranks that train
  for (int r = 0; r < env.world_size; ++r) {
    if (grid.Idle(r)) idle.push_back(r);
    if (r == 0 || !grid.Idle(r)) loss_ranks.push_back(r);
  }
  if (env.rank == 0) {
    if (auto warning = ProfiledOptimizerMismatch(plan, o))
      std::fprintf(stderr, "%s\n", warning->c_str());
  }
  if (env.rank == 0 && !idle.empty()) {
    std::fprintf(stderr, "dapple train: the plan uses %d of %d processes; rank%s %s idle\n",
                 grid.num_active(), env.world_size, idle.size() > 1 ? "s" : "",
                 fmt::format("{}", fmt::join(idle, ", ")).c_str());
  }

  // Note [Leak on failure]: destroying a process group with a wait still pending can block
  // until gloo's own timeout; a failing rank must exit at once, so on an exception the
  // communicator is deliberately leaked (the process is about to exit).
  std::unique_ptr<Communicator> comm_owner = std::make_unique<Communicator>(env, o.timeout);
  struct LeakOnThrow {
    std::unique_ptr<Communicator>& p;
    int pending = std::uncaught_exceptions();
    ~LeakOnThrow() {
      if (std::uncaught_exceptions() > pending) (void)p.release();
    }
  } leak_on_throw{comm_owner};
  Communicator& comm = *comm_owner;
  if (sp && sp->replicas() > 1) comm.CreateGroup(fmt::format("stage{}", stage), sp->devices);
  const bool sums_loss = env.rank == 0 || !grid.Idle(env.rank);
  const std::string loss_group = idle.empty() ? "" : "loss";  // "": the world
  if (!idle.empty() && sums_loss) comm.CreateGroup(loss_group, loss_ranks);
  std::optional<TiedParameters> tied;
  if (sp) tied.emplace(model, plan, grid, stage, comm);

  // What crosses this stage's boundaries (boundary.h): the previous stage's output spec
  // comes through the store, so that no rank runs another stage's layers.
  BoundarySpec in_spec, out_spec;
  if (sp && !chunked) {  // chunked: ChunkSet, per chunk
    in_spec = stage == 0 ? ModelInputSpec(model)
                         : BoundarySpecFromJson(
                               comm.Lookup(fmt::format("boundary{}", stage - 1),
                                           fmt::format("{}: waiting for stage {}'s output shapes",
                                                       grid.Describe(env.rank), stage - 1)));
    out_spec = ProbeStage(model, sp->first_layer, sp->last_layer, in_spec, device);
    if (replica == 0 && stage + 1 < S)
      comm.Publish(fmt::format("boundary{}", stage), BoundarySpecToJson(out_spec));
  }
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::optional<GradClipper> clipper;  // Note [Global gradient clipping]
  if (sp) {
    optimizer = MakeOptimizer(o.optimizer, HeldParameters(model, held));
    if (o.clip_grad_norm > 0)
      clipper.emplace(o.clip_grad_norm, HeldParameters(model, held), grid, env.rank,
                      tied ? &*tied : nullptr, comm);
  }
  int64_t start = 0;
  std::vector<double> losses;
  if (o.resume || (o.resume_auto && DecideToResume(ResumeMode::kAuto, o.checkpoint_dir, comm))) {
    CheckpointMeta meta = Resume(o, model, held_layers, optimizer.get(), comm);
    start = meta.step;
    losses = meta.losses;
  }
  // Note [Data a stage reads] (models/data.h): in looped placement the first group holds
  // virtual stage 0 and the last group the last virtual stage.
  std::unique_ptr<Dataset> data;
  if (sp && (stage == 0 || stage == S - 1)) {
    data = MakeDataset(o.data, model, o.seed,
                       o.data_cache_dir.empty() ? DefaultDataCacheDir() : o.data_cache_dir,
                       o.data_files, DataParts{stage == 0, stage == S - 1});
  }
  StageWorkerOptions wo;
  wo.global_batch = plan.global_batch_size;
  wo.micro_batch = plan.micro_batch_size;
  wo.recompute = o.recompute || (sp && plan.Recomputes(stage));
  wo.bucket_bytes = o.bucket_bytes;
  wo.overlap_allreduce = plan.allreduce_overlap && !o.no_overlap;
  wo.timeout = o.timeout;
  wo.die_at_step = o.die_at_rank == env.rank ? o.die_at_step : -1;
  wo.tied = tied && !tied->empty() ? &*tied : nullptr;
  wo.clip = clipper ? &*clipper : nullptr;
  std::optional<StageWorker> worker;
  std::optional<ChunkSet> chunks;
  if (sp && chunked) {
    chunks.emplace(model, plan, grid, env.rank, lowered.programs[stage], comm, *optimizer, device,
                   wo, o.recompute);
  } else if (sp) {
    worker.emplace(model, grid, env.rank, lowered.programs[stage], in_spec, out_spec, comm,
                   *optimizer, device, sp->first_layer, sp->last_layer, wo);
  }

  const bool leader = env.rank == 0;
  CheckpointWriter writer(comm, !o.sync_checkpoints);  // destroyed before comm_owner
  ProgressPrinter progress(o, plan, start);
  RunStats stats;
  // The traced steps are the last trace_steps ones; a barrier before the first lines the
  // ranks up, so that the timeline starts with every rank at the step's start.
  const int64_t first_traced = std::max<int64_t>(start, o.steps - std::max(1, o.trace_steps));
  const bool tracing = !o.trace_path.empty();
  std::vector<TimelineEvent> traced;
  comm.Barrier(fmt::format("rank {}: start of training", env.rank));
  // Note [Loss off the critical path] (step_losses.h): step k's loss is summed while step k+1
  // runs, and at once before a checkpoint, the trace and the end.
  StepLosses step_losses(comm, loss_group, sums_loss, env.rank, o.timeout);
  auto record = [&](std::optional<FinishedStep> done) {
    if (!done) return;
    CheckLossFinite(*done, plan.global_batch_size, o.data_files.shuffle, leader);
    losses.push_back(done->loss);
    stats.AddStep(done->events, done->t0, done->t1, done->step_ms, done->step == start);
    if (leader) progress.Step(done->step, done->loss, done->step_ms, done->grad_norm);
  };
  // The traced steps also show what a rank does between its schedules (category "other"):
  // DATA (the next global batch), LOSS (waiting for the previous step's loss sum) and HOST
  // (the rest: progress, starting this step's sum), which the simulator does not model.
  auto host_event = [&](const char* name, double from, double to) {
    if (sp) traced.push_back({env.rank, name, "other", from, to, stage, -1});
  };
  FreedMemoryBound freed_memory(16 << 20);  // Note [Freed memory between steps]
  for (int64_t step = start; step < o.steps; ++step) {
    if (tracing && step == first_traced) {
      record(step_losses.Finish(NowMs()));
      comm.Barrier(fmt::format("rank {}: before the traced steps", env.rank));
    }
    const bool traced_step = tracing && step >= first_traced;
    const double d0 = NowMs();
    Batch batch = data ? data->GlobalBatch(step, plan.global_batch_size) : Batch{};
    if (optimizer)
      SetLearningRate(*optimizer, LearningRateAt(o.lr_schedule, o.optimizer.lr, step, o.steps));
    double t0 = NowMs();
    StepResult r = worker   ? worker->RunStep(step, batch)
                   : chunks ? chunks->RunStep(step, batch)
                            : StepResult{};
    double t1 = NowMs();
    record(step_losses.Finish(t0));
    const double t2 = NowMs();
    if (leader) ReportCompletedSteps(step + 1);  // for a restart's line (Note [Restarts])
    if (traced_step) {
      traced.insert(traced.end(), r.events.begin(), r.events.end());
      host_event("DATA", d0, t0);
      host_event("LOSS", t1, t2);
    }
    step_losses.Start(step, r.loss_part, clipper ? clipper->ReportedPart() : 0, t0, t1,
                      std::move(r.events));
    freed_memory.AfterStep();
    if (traced_step) host_event("HOST", t2, NowMs());
    const bool last = step + 1 == o.steps;
    const bool due = !o.checkpoint_dir.empty() &&
                     (last || (o.checkpoint_every > 0 && (step + 1) % o.checkpoint_every == 0));
    if (due || last) record(step_losses.Finish(NowMs()));
    if (due)
      SaveCheckpoint(o, model, held_layers, replica, optimizer.get(), env.rank, writer, step + 1,
                     losses);
    if (tracing && last) WriteMeasuredTrace(comm, grid, plan, o, traced);
  }
  writer.Wait();  // the final checkpoint is committed before the summary and the export
  if (worker) stats.SetPeaks(worker->peak_live_micro_batches(), worker->peak_live_bytes());
  if (chunks) stats.SetPeaks(chunks->peak_live_micro_batches(), chunks->peak_live_bytes());
  stats.SetDataBytes(data ? data->HeldBytes() : 0);
  stats.SetMemory(Bytes(HeldParameters(model, held)),
                  optimizer ? OptimizerStateBytes(*optimizer, o.optimizer.kind) : 0,
                  PeakResidentBytes(), resident_at_start);
  if (o.die_at_rank == env.rank && o.die_at_step == o.steps) std::raise(SIGKILL);  // test hook
  MeasuredRun measured = GatherAndPrintSummary(comm, grid, plan, o, stats, losses, start);
  if (!o.save_model.empty() && leader) {
    ExportScriptModel(o.model, CheckpointStepDir(o.checkpoint_dir, o.steps), o.save_model);
    if (o.log_json) {
      std::printf("%s\n", nlohmann::json{{"saved_model", o.save_model}}.dump().c_str());
    } else {
      std::printf("wrote the trained model to %s\n", o.save_model.c_str());
    }
  }
  if (o.evaluate) {
    std::vector<HeldStage> held_stages;  // in (virtual) stage order
    if (sp && chunked) {
      for (int c = 0; c < grid.num_chunks(); ++c)
        held_stages.push_back({c * S + stage, held[c].first, held[c].second, chunks->input(c)});
    } else if (sp) {
      held_stages.push_back({stage, sp->first_layer, sp->last_layer, in_spec});
    }
    EvaluateTrainedStages(o, model, grid, env.rank, held_stages, data.get(), device, comm);
  }
  // Every rank's files were in before the final commit (its writers' confirmations).
  if (!o.save_model.empty() && options.checkpoint_dir.empty() && leader)
    std::filesystem::remove_all(o.checkpoint_dir);
  if (leader) PrintPredictedVsMeasured(plan, o, measured);
}

}  // namespace dapple
