// `dapple train`: trains a zoo model under a plan, one process per device
// (docs/design.md section 7). With --nproc N it checks the plan, then launches N local processes
// of itself and relays the first failure (with --nnodes/--node-rank/--master-addr/
// --master-port: one node of several, as torchrun; node r runs the plan's devices
// r*N .. r*N+N-1); without it, it is one rank of a job whose launcher set RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "dapple/common/error.h"
#include "dapple/common/malloc_tuning.h"
#include "dapple/common/precision.h"
#include "dapple/common/process_memory.h"
#include "dapple/format/plan.h"
#include "dapple/models/data.h"
#include "dapple/models/model_source.h"
#include "dapple/models/zoo.h"
#include "dapple/runtime/checkpoint/recipe.h"
#include "dapple/runtime/checkpoint/resume_policy.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/launch/launcher.h"
#include "dapple/runtime/launch/restarts.h"
#include "dapple/runtime/train/train_options.h"
#include "elastic.h"
#include "launch_cli.h"
#include "model_cli.h"
#include "recipe_cli.h"

namespace dapple {
namespace {

struct TrainArgs {
  TrainOptions o;
  std::vector<std::string> model_opts;    // key=value
  std::vector<std::string> model_extras;  // --key value words
  std::string optimizer = "sgd";
  std::string dtype = "float32";
  std::string precision = "float32";
  std::string device = "cpu";
  double timeout_s = 60;
  std::string resume;                   // --resume [auto]: "" for the bare flag
  CLI::Option* resume_given = nullptr;  // counts --resume
  double bucket_mb = 25;
  LaunchCli launch;  // launch.nproc == 0: one rank of a job started by someone else
  ModelCli model_cli;
  bool no_shuffle = false;
  int max_restarts = 0;
  bool elastic = false;
  ElasticInputs elastic_inputs;  // --profile, --cluster for --elastic
  std::string exclude_devices;   // --exclude-devices LIST
  RecipeCli recipe;              // --lr-schedule, --clip-grad-norm, ...
};

void Finish(TrainArgs& a) {
  a.o.model_options = ParseModelFlags(a.model_opts);
  for (const auto& [k, v] : ParseModelFlags(a.model_extras)) a.o.model_options[k] = v;
  a.o.script = ScriptOptionsOf(a.model_cli, a.o.model, a.o.data);
  a.o.data_files.seq_len = a.model_cli.seq_len;
  a.o.data_files.shuffle = !a.no_shuffle;
  if (!a.o.save_model.empty() && !IsTorchScriptPath(a.o.model) && !IsExportedProgramPath(a.o.model))
    ThrowInput("--save-model: only users' models (--model PATH.pt or PATH.pt2) are exported");
  a.o.optimizer.kind = ParseOptimizerKind(a.optimizer);
  CheckOptimizerOptions(a.o.optimizer);
  if (a.dtype == "float32") {
    a.o.dtype = torch::kFloat32;
  } else if (a.dtype == "float64") {
    a.o.dtype = torch::kFloat64;
  } else {
    ThrowInput("--dtype {}: expected float32 or float64", a.dtype);
  }
  a.o.precision = ParsePrecision(a.precision);
  a.o.device = ParseDeviceChoice(a.device);
  CheckMasterDtype(a.o.precision, a.dtype);
  if (a.timeout_s <= 0) ThrowInput("--timeout-s {}: must be positive", a.timeout_s);
  a.o.timeout = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_s * 1000));
  a.o.bucket_bytes = std::max<int64_t>(1, static_cast<int64_t>(a.bucket_mb * 1048576));
  if (a.o.steps < 1) ThrowInput("--steps {}: must be at least 1", a.o.steps);
  FinishRecipe(a.recipe, a.o);
  if (a.resume_given && a.resume_given->count() > 0) {
    ResumeMode mode = ParseResumeMode(a.resume);
    a.o.resume = mode == ResumeMode::kAlways;
    a.o.resume_auto = mode == ResumeMode::kAuto;
  }
  if ((a.o.resume || a.o.resume_auto) && a.o.checkpoint_dir.empty())
    ThrowInput("--resume needs --checkpoint-dir");
  if (a.o.keep_checkpoints < 0)
    ThrowInput("--keep-checkpoints {}: must be 0 (all) or more", a.o.keep_checkpoints);
  if (a.max_restarts < 0) ThrowInput("--max-restarts {}: must be 0 or more", a.max_restarts);
  if (a.max_restarts > 0 && a.launch.nproc == 0)
    ThrowInput("--max-restarts needs --nproc: the local launcher restarts the ranks");
  if (a.max_restarts > 0 && a.launch.nnodes > 1)
    ThrowInput(
        "--max-restarts: only for a job of one node; with --nnodes {} let the outer "
        "launcher restart every node with --resume auto",
        a.launch.nnodes);
  if (a.max_restarts > 0 && a.o.checkpoint_dir.empty())
    ThrowInput(
        "--max-restarts needs --checkpoint-dir: a restart resumes from its newest checkpoint");
  // --elastic (elastic.h): the launcher plans for excluded and lost devices; a launcher or a
  // rank started with fewer processes than the plan needs plans for those it has.
  if (a.elastic && a.o.checkpoint_dir.empty())
    ThrowInput("--elastic needs --checkpoint-dir: the job resumes from it under the new plan");
  if (!a.exclude_devices.empty() && !a.elastic)
    ThrowInput("--exclude-devices needs --elastic: the job is planned again without them");
  if (!a.exclude_devices.empty() && (a.launch.nproc == 0 || a.launch.nnodes > 1))
    ThrowInput("--exclude-devices: only for a job of one node started with --nproc");
}

// The model with no layer held (names, shapes, tied parameters): loaded once in a process, for
// the planner and the plan check (Note [Stage-local models] in models/model.h).
Model LoadNamesOnly(const TrainArgs& a) {
  return LoadModel(SourceOf(a.o), a.o.seed, a.o.dtype, kNoLayers);
}

// --elastic's planner for a job of `world` processes: the profile and cluster of the flags or
// the plan's record; new plans go into the checkpoint folder. `model`: LoadNamesOnly's.
std::shared_ptr<const ElasticPlanner> MakePlanner(const TrainArgs& a, const Plan& plan, int world,
                                                  const Model& model) {
  ElasticInputs in = WithPlanRecord(a.elastic_inputs, plan, a.o.plan_path);
  in.plan_folder = a.o.checkpoint_dir;
  std::vector<std::string> layers;
  for (const auto& layer : model.layers) layers.push_back(layer.name);
  in.interleave = model.shared_parameters.empty();
  return std::make_shared<const ElasticPlanner>(in, layers, world);
}

int LaunchTraining(TrainArgs& a) {
  // One clear line for a bad plan, before any process starts: every node checks that the
  // job has the processes the plan needs, so no node starts ranks the others lack. Ranks
  // the plan leaves out idle (RunTraining). Under --elastic the ranks plan for fewer
  // processes themselves (Note [Fewer processes than the plan], elastic.h); the launcher
  // makes the same plan first, to check it.
  const LaunchCli& l = a.launch;
  const Plan plan = ReadPlanJson(a.o.plan_path);
  std::optional<Model> model;  // loaded once, for the planner and the plan check
  std::shared_ptr<const ElasticPlanner> planner;
  if (a.elastic) {
    model = LoadNamesOnly(a);
    planner = MakePlanner(a, plan, l.world_size(), *model);
  }
  if (int devices = plan.num_devices(); devices > l.world_size()) {
    if (!planner)
      ThrowInput(
          "{}: the plan uses {} devices but the job has {} processes (--nnodes {} x --nproc {})",
          a.o.plan_path.string(), devices, l.world_size(), l.nnodes, l.nproc);
    a.o.plan = PlanForProcesses(*planner, l.world_size(), plan, a.o.plan_path, false).plan;
  }
  if (!a.o.plan) a.o.plan = plan;  // the file is read once
  CheckedPlan checked = LoadAndCheckPlan(a.o, l.world_size(), std::move(model));
  if (a.o.resume || a.o.resume_auto)  // Note [Recipes in checkpoints]: refused in one line
    CheckRecipeOfLatestCheckpoint(
        a.o.checkpoint_dir,
        RecipeOf(a.o.optimizer, a.o.lr_schedule, a.o.clip_grad_norm, a.o.steps, a.o.precision));
  // A user's data file is checked against the model here too: one line, no process started.
  if (IsDataFilePath(a.o.data)) CheckDataFile(a.o.data, checked.model, a.o.data_files);
  // --device cuda without a GPU: refused before any process starts.
  DeviceForLocalRank(a.o.device, 0);
  LaunchOptions lo = MakeLaunchOptions("train", l, SelfArgvWithoutLaunchOptions());
  lo.term_delay = a.o.timeout + std::chrono::seconds(2);  // let them report what they waited on
  lo.kill_grace = std::chrono::seconds(2);
  RestartPolicy restarts;  // Note [Restarts]
  restarts.max_restarts = a.max_restarts;
  restarts.checkpoint_dir = a.o.checkpoint_dir;
  restarts.user_resumes = a.o.resume || a.o.resume_auto;
  restarts.world_size = l.world_size();
  if (planner) {
    std::vector<int> in_use;  // the cluster's device of each process
    for (int d = 0; d < l.world_size(); ++d) in_use.push_back(d);
    if (!a.exclude_devices.empty())
      in_use = ExcludeDevices(*planner, ParseDeviceList(a.exclude_devices, l.world_size()), lo);
    restarts.world_size = lo.nproc_per_node * lo.nnodes;
    // A lost device is a rank that failed twice: only with restarts.
    if (a.max_restarts > 0) restarts.replan = MakeElasticReplanner(planner, in_use);
  }
  const int code = LaunchWithRestarts(lo, restarts);
  if (a.o.log_json) {  // the launcher's own memory: it holds no stage (Note [Probing with zeros])
    const nlohmann::json launcher{
        {"launcher",
         {{"peak_resident_bytes", PeakResidentBytes()}, {"model_loads", ModelLoads()}}}};
    std::printf("%s\n", launcher.dump().c_str());
  }
  return code;
}

void RunTrainCommand(TrainArgs& a) {
  Finish(a);
  KeepFreedMemoryForReuse();  // Note [Freed memory stays]
  if (a.launch.nproc > 0) {
    int code = LaunchTraining(a);
    CommandExitCode() = code == 0 ? 0 : (code > 255 ? 1 : code);
    return;
  }
  DistEnv env = DistEnv::FromEnvironment();
  if (env.world_size == 1 && std::getenv("MASTER_PORT") == nullptr) {
    env.master_port = PickFreePort();  // a lone process needs no agreed port
  }
  std::optional<Model> model;  // loaded here for the planner: the rank takes it on
  if (a.elastic) {             // Note [Fewer processes than the plan] (elastic.h)
    const Plan plan = ReadPlanJson(a.o.plan_path);
    if (plan.num_devices() > env.world_size) {
      model = LoadNamesOnly(a);
      a.o.plan = PlanForProcesses(*MakePlanner(a, plan, env.world_size, *model), env.world_size,
                                  plan, a.o.plan_path, /*record=*/env.rank == 0)
                     .plan;
    }
  }
  RunTraining(a.o, env, std::move(model));
}

// What to train: the model, its options and its data.
void AddModelAndDataOptions(CLI::App* cmd, TrainArgs* a) {
  cmd->add_option(
         "--model", a->o.model,
         "Zoo model name (as for `dapple profile`), a TorchScript file PATH.pt or a torch.export "
         "program PATH.pt2")
      ->required();
  AddModelCliOptions(cmd, &a->model_cli);
  cmd->add_option("--opt", a->model_opts,
                  "Model option key=value (repeatable), e.g. --opt hidden=64 --opt layers=3");
  cmd->add_option("--plan", a->o.plan_path,
                  "Plan JSON (dapple-plan/1) whose layer ids are the "
                  "model's layer names")
      ->required();
  cmd->add_option("--steps", a->o.steps, "Total training steps (a resumed run continues to it)")
      ->required();
  cmd->add_option("--data", a->o.data,
                  "fashion-mnist | kjv | synthetic | PATH.pt (torch.save dict of 'input' and "
                  "'target') | PATH.bin (uint16 tokens, with --seq-len)")
      ->capture_default_str();
  cmd->add_option("--eval-data", a->o.data_files.eval_path,
                  "Held-out data file for --eval (same format as --data PATH)");
  cmd->add_flag("--no-shuffle", a->no_shuffle,
                "Data files: global batch k holds samples k*GBS .. (k+1)*GBS-1 (wrapping), as a "
                "plain PyTorch loop would");
  cmd->add_option("--save-model", a->o.save_model,
                  "Users' models: write the module with the trained weights here (for a .pt2, "
                  "a state_dict)");
  cmd->add_option("--data-cache-dir", a->o.data_cache_dir, "Where decompressed data is cached");
}

// How each step computes: the optimizer, the number types, the device.
void AddComputeOptions(CLI::App* cmd, TrainArgs* a) {
  cmd->add_option("--optimizer", a->optimizer, "sgd (momentum) | adam | adamw")
      ->capture_default_str();
  cmd->add_option("--lr", a->o.optimizer.lr, "Learning rate")->capture_default_str();
  cmd->add_option("--momentum", a->o.optimizer.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", a->o.optimizer.weight_decay,
                  "Weight decay (default: the optimizer's own)");
  AddRecipeOptions(cmd, &a->recipe, &a->o);
  cmd->add_option("--seed", a->o.seed, "Seed of the parameters and the data")
      ->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "float32 | float64 (the parameters: master weights)")
      ->capture_default_str();
  cmd->add_option("--precision", a->precision,
                  "float32 | bf16: forward and loss under bfloat16 autocast, float32 master "
                  "weights, optimizer state and allreduce, bf16 activations between stages")
      ->capture_default_str();
  cmd->add_option("--device", a->device,
                  "cpu | cuda (the GPU of each process's local rank; refused without one) | "
                  "auto (cuda where there is a GPU, else cpu)")
      ->capture_default_str();
  cmd->add_flag("--recompute", a->o.recompute,
                "Keep only stage inputs and recompute the forward in the backward");
  cmd->add_flag("--shard-optimizer", a->o.shard_optimizer,
                "Shard the optimizer state across the replicas of every stage that has more "
                "than one (reduce-scatter, sharded step, all-gather)");
  cmd->add_option("--bucket-mb", a->bucket_mb, "Allreduce bucket size in MiB")
      ->capture_default_str();
  cmd->add_flag("--no-overlap", a->o.no_overlap,
                "Allreduce after the last backward, even when the plan overlaps it");
}

// Surviving failures: checkpoints, resuming, restarts and elastic re-planning.
void AddRecoveryOptions(CLI::App* cmd, TrainArgs* a) {
  cmd->add_option("--checkpoint-dir", a->o.checkpoint_dir,
                  "Save per-layer checkpoints here (always after the last step)");
  cmd->add_option("--checkpoint-every", a->o.checkpoint_every, "Also every K steps");
  cmd->add_option("--keep-checkpoints", a->o.keep_checkpoints,
                  "Keep only the K newest checkpoints (0: all); a damaged one falls back to "
                  "the one before, so keep at least 2")
      ->capture_default_str();
  cmd->add_flag("--sync-checkpoints", a->o.sync_checkpoints,
                "Write checkpoints in the training thread: a saving step waits for the whole "
                "write (default: copy to memory, then write in the background)");
  a->resume_given =
      cmd->add_option("--resume", a->resume,
                      "Continue from the newest checkpoint in --checkpoint-dir (the plan may "
                      "differ); `--resume auto`: only when one exists, else start fresh")
          ->expected(0, 1);
  cmd->add_option("--max-restarts", a->max_restarts,
                  "With --nproc: after a rank fails, start every rank again from the newest "
                  "checkpoint, at most N times")
      ->capture_default_str();
  cmd->add_flag("--elastic", a->elastic,
                "Plan again (--profile, --cluster, else those the plan records) for the devices "
                "left: without --exclude-devices, without a rank that failed twice in a row "
                "(with --max-restarts), or for fewer processes than the plan needs");
  cmd->add_option("--profile", a->elastic_inputs.profile,
                  "For --elastic: the model's profile (default: the plan's)");
  cmd->add_option("--cluster", a->elastic_inputs.cluster,
                  "For --elastic: the cluster (preset or file) the job runs on (default: the "
                  "plan's)");
  cmd->add_option("--exclude-devices", a->exclude_devices,
                  "With --elastic and --nproc: devices (e.g. 2 or 1,3) that count as lost from "
                  "the start; the job is planned for the others");
  cmd->add_option("--timeout-s", a->timeout_s,
                  "Longest wait for a peer or the rendezvous before failing")
      ->capture_default_str();
}

// What the run reports: traces, progress lines, the evaluation.
void AddReportOptions(CLI::App* cmd, TrainArgs* a) {
  cmd->add_option("--trace", a->o.trace_path,
                  "Write the measured timeline of the last step (or --trace-steps) as a Chrome "
                  "trace, as `simulate`");
  cmd->add_option("--trace-steps", a->o.trace_steps,
                  "How many of the last steps --trace holds (default 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--log-json", a->o.log_json, "One JSON object per step and a JSON summary");
  cmd->add_flag("--quiet", a->o.quiet, "No per-step lines");
  cmd->add_option("--log-every", a->o.log_every,
                  "Off a terminal, a progress line every K steps (default: steps / 10; on a "
                  "terminal one line is updated in place)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--eval", a->o.evaluate,
                "After training, report the held-out loss, the accuracy (classes) and the "
                "perplexity (language models) of the trained stages");
  cmd->add_option("--eval-samples", a->o.eval_samples,
                  "Evaluate at most this many held-out samples (default: all)")
      ->check(CLI::PositiveNumber);
}

}  // namespace

void AddTrainCommand(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model under a plan: pipeline + data parallel over c10d (one process per "
      "device)");
  AddModelAndDataOptions(cmd, a.get());
  AddLaunchOptions(cmd, &a->launch,
                   "Launch this many local processes (else read RANK, WORLD_SIZE, LOCAL_RANK, "
                   "MASTER_ADDR, MASTER_PORT)");
  AddComputeOptions(cmd, a.get());
  AddRecoveryOptions(cmd, a.get());
  AddReportOptions(cmd, a.get());
  // Model options may also be given as extra words, as for `dapple profile`: --hidden 64.
  cmd->allow_extras();
  cmd->callback([a, cmd] {
    for (const auto& w : cmd->remaining()) a->model_extras.push_back(w);
    RunTrainCommand(*a);
  });
}

}  // namespace dapple
