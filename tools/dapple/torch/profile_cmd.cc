// `dapple profile`: measures a zoo model layer by layer on this CPU (docs/design.md
// section 1) and writes the profile the planner reads: `dapple-profile/1` JSON or PipeDream
// graph text. Model options come as --opt key=value or as --key value after the command's
// own flags. Bad input (unknown model or option, batch 0): one line, exit code 2.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "dapple/common/core_sets.h"
#include "dapple/common/error.h"
#include "dapple/common/machine.h"
#include "dapple/common/malloc_tuning.h"
#include "dapple/common/parse_int.h"
#include "dapple/common/precision.h"
#include "dapple/cpu/blas_env.h"
#include "dapple/format/local_cluster.h"
#include "dapple/format/profile.h"
#include "dapple/models/data.h"
#include "dapple/models/mixed_precision.h"
#include "dapple/models/model.h"
#include "dapple/models/model_source.h"
#include "dapple/models/zoo.h"
#include "dapple/profiler/profiler.h"
#include "dapple/runtime/comm/device.h"
#include "dapple/runtime/optim/optimizer.h"
#include "model_cli.h"

namespace dapple {
namespace {

struct ProfileArgs {
  std::string model;
  std::vector<std::string> opts;  // key=value
  int batch = 0;
  std::string batches;  // "1,2,4"
  int warmup = 2;
  int repeat = 5;
  int threads = 0;
  uint64_t seed = 1;
  std::string dtype = "float32";
  std::string precision = "float32";
  std::string output;
  std::string format = "json";
  std::string optimizer = "sgd";
  std::string device = "cpu";
  bool cold_caches = false;
  ModelCli model_cli;
  std::string data;  // a data file: the input sample of a TorchScript model
};

// 1, 2, 4, ... up to 4 x `batch` (the micro-batch and per-replica sizes the planner tries
// for global batches up to about 4 x PBS), and `batch` itself.
std::vector<int> DefaultBatchSizes(int batch) {
  std::vector<int> sizes;
  for (int b = 1; b <= 4 * batch; b *= 2) sizes.push_back(b);
  sizes.push_back(batch);
  return sizes;
}

std::vector<int> ParseBatches(const std::string& text) {
  std::vector<int> sizes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::optional<int> v = ParseWholeInt(item);
    if (!v || *v <= 0)
      ThrowInput("--batches: expected positive integers separated by commas, got '{}'", text);
    sizes.push_back(*v);
  }
  return sizes;
}

// Note [Data in the memory figure] (format/profile.h): the bytes of the data set that a rank
// of the first stage and one of the last will hold, loaded as `dapple train --data` loads it.
void RecordTrainingData(Profile* p, const std::string& data, const Model& model, uint64_t seed,
                        int64_t seq_len) {
  DataFileOptions files;
  files.seq_len = seq_len;
  const std::filesystem::path cache = DefaultDataCacheDir();
  p->data_input_bytes = static_cast<double>(
      MakeDataset(data, model, seed, cache, files, DataParts{true, false})->HeldBytes());
  p->data_target_bytes = static_cast<double>(
      MakeDataset(data, model, seed, cache, files, DataParts{false, true})->HeldBytes());
}

void RunProfile(const ProfileArgs& a, const std::vector<std::string>& extras) {
  if (a.batch <= 0) ThrowInput("--batch: must be a positive integer, got {}", a.batch);
  if (a.format != "json" && a.format != "pipedream")
    ThrowInput("--format: expected json or pipedream, got '{}'", a.format);
  if (a.dtype != "float32" && a.dtype != "float64")
    ThrowInput("--dtype: expected float32 or float64, got '{}'", a.dtype);
  const Precision precision = ParsePrecision(a.precision);
  CheckMasterDtype(precision, a.dtype);
  if (a.threads < 0) ThrowInput("--threads: must be >= 0, got {}", a.threads);
  OptimizerOptions optimizer;  // dapple train's defaults for the rest (momentum 0.9)
  try {
    optimizer.kind = ParseOptimizerKind(a.optimizer);
  } catch (const InputError& e) {
    ThrowInput("--optimizer: {}", e.what());
  }
  ModelOptions options = ParseModelFlags(a.opts);
  for (const auto& [k, v] : ParseModelFlags(extras)) options[k] = v;
  const bool script = IsTorchScriptPath(a.model) || IsExportedProgramPath(a.model);
  ModelSource source{a.model, options, ScriptOptionsOf(a.model_cli, a.model, a.data)};
  ProfilerOptions po;
  po.batch_size = a.batch;
  po.batch_sizes = a.batches.empty() ? DefaultBatchSizes(a.batch) : ParseBatches(a.batches);
  po.batch_sizes_optional = a.batches.empty();  // Note [Sizes the model refuses]
  po.warmup = a.warmup;
  po.repeat = a.repeat;
  po.cold_caches = a.cold_caches;
  po.seed = a.seed;
  po.optimizer = optimizer;
  po.device = DeviceForLocalRank(ParseDeviceChoice(a.device), 0);  // Note [A device per process]
  UseDevice(po.device);
  // A line rewritten in place only on a terminal; logs and pipes get none (the result and
  // the summary say what was measured).
  po.progress = isatty(fileno(stderr)) != 0;
  // Check everything the user gave before the model build.
  if (!script) {
    ResolveModelOptions(a.model, options);
    CountModelParameters(a.model, options);
  }
  KeepFreedMemoryForReuse();  // Note [Freed memory stays]
  // Note [Profile as the devices run]: by default each layer is timed with the threads each
  // training process of the local cluster gets, so that the plan's times are the training's.
  const int devices = LoadLocalCluster().cluster.num_devices();
  const int cores = ThisMachine().cores;
  const int want = a.threads > 0 ? a.threads : ThreadsPerProcess(cores, devices);
  // Note [Devices as cores] (common/core_sets.h): each of the devices runs on its own core,
  // as `dapple train`'s launcher pins them, and the profile keeps the slowest core's times.
  if (want == 1 && devices > 1)
    if (auto sets = DeviceCoreSets(devices, 1)) po.core_sets = *sets;
  int threads = SetComputeThreads(want);
  torch::Dtype dtype = a.dtype == "float64" ? torch::kFloat64 : torch::kFloat32;
  Model model = LoadModel(source, a.seed, dtype);
  UseMixedPrecision(model, precision);  // the profile records model.precision
  if (po.device.is_cuda())
    for (auto& layer : model.layers) layer.module->to(po.device);
  Profile p = ProfileModel(model, po);
  if (!a.data.empty()) RecordTrainingData(&p, a.data, model, a.seed, a.model_cli.seq_len);
  if (!script)
    for (const auto& [k, v] : ResolveModelOptions(a.model, options)) p.metadata["option." + k] = v;
  p.metadata["parameters"] = std::to_string(model.ParameterCount());
  if (a.format == "json")
    WriteProfileJson(p, a.output);
  else
    WritePipeDreamGraph(p, a.output);
  double fwd = 0, bwd = 0, update = 0;
  for (const auto& l : p.layers) fwd += l.forward_ms, bwd += l.backward_ms, update += l.update_ms;
  std::printf(
      "%s: %d layers, %lld parameters, batch %d, %d threads, BLAS %s: "
      "forward %.3f ms + backward %.3f ms, %s update %.3f ms -> %s\n",
      a.model.c_str(), p.num_layers(), static_cast<long long>(model.ParameterCount()), a.batch,
      threads, BlasName().c_str(), fwd, bwd, a.optimizer.c_str(), update, a.output.c_str());
  if (!po.core_sets.empty())
    std::printf("  every time is the slowest of the %zu devices' cores (%s), as training runs\n",
                po.core_sets.size(), FormatCoreSets(po.core_sets).c_str());
}

std::string ModelHelp() {
  std::string help =
      "A TorchScript file PATH.pt (docs/your-model.md), a torch.export program PATH.pt2 "
      "(docs/torch-export.md), or a zoo model:";
  for (const auto& name : ModelNames()) {
    std::vector<std::string> opts;
    for (const auto& [k, v] : DefaultModelOptions(name))
      if (k != "preset") opts.push_back(k + "=" + v);
    std::vector<std::string> presets;
    for (const auto& [k, v] : ModelPresets(name)) presets.push_back(k);
    help += fmt::format("\n  {} ({}; presets: {})", name, fmt::join(opts, " "),
                        fmt::join(presets, ", "));
  }
  return help;
}

}  // namespace

void AddProfileCommand(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "profile", "Profile a zoo model layer by layer on this CPU (forward/backward times, sizes)");
  cmd->add_option("--model", a->model, ModelHelp())->required();
  AddModelCliOptions(cmd, &a->model_cli);
  cmd->add_option("--data", a->data,
                  "The data training reads (PATH.pt, PATH.bin, fashion-mnist, kjv): a TorchScript "
                  "model's input shape, and the data a first and a last stage rank hold, which "
                  "the plan's memory counts");
  cmd->add_option("--opt", a->opts,
                  "Model option key=value (repeatable); --key value after the flags works too; "
                  "preset=NAME selects a preset");
  cmd->add_option("--batch", a->batch, "Profile batch size (PBS)")->required();
  cmd->add_option("--batches", a->batches,
                  "Time these batch sizes, e.g. 1,2,4 (forward_ms_by_batch/backward_ms_by_batch; "
                  "default: the powers of two up to 4 x --batch)");
  cmd->add_option("--warmup", a->warmup, "Untimed runs per layer before timing")
      ->capture_default_str();
  cmd->add_option("--repeat", a->repeat, "Timed runs per layer (median)")->capture_default_str();
  cmd->add_flag("--cold-caches", a->cold_caches,
                "Write 64 MiB before every timed op, so that weights come from memory as when "
                "other processes share the caches (CPU devices on one machine)");
  cmd->add_option("--threads", a->threads,
                  "Compute threads (default: as `dapple train` gives each process of the local "
                  "cluster, cores / its devices)");
  cmd->add_option("--seed", a->seed, "Seed of the weights and the input batch")
      ->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "float32 | float64 (the parameters)")->capture_default_str();
  cmd->add_option("--precision", a->precision,
                  "float32 | bf16: compute under bfloat16 autocast over float32 weights, as "
                  "`dapple train --precision bf16` (recorded in the profile)")
      ->capture_default_str();
  cmd->add_option("--optimizer", a->optimizer,
                  "Optimizer whose per-layer update is timed (update_ms): sgd (momentum 0.9, as "
                  "dapple train) | adam | adamw")
      ->capture_default_str();
  cmd->add_option("--device", a->device,
                  "cpu | cuda (time the layers on GPU 0 with CUDA events; refused without one) "
                  "| auto")
      ->capture_default_str();
  cmd->add_option("-o,--output", a->output, "Output file")->required();
  cmd->add_option("--format", a->format, "json (dapple-profile/1) | pipedream")
      ->capture_default_str();
  cmd->allow_extras();
  cmd->callback([a, cmd] { RunProfile(*a, cmd->remaining()); });
}

}  // namespace dapple
