// The summary of a training run: every rank's figures gathered to rank 0, which prints them
// per stage (the largest over the stage's replicas) as text or JSON.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "dapple/common/json_util.h"
#include "dapple/models/model_source.h"
#include "dapple/runtime/train/train_report.h"

namespace dapple {
namespace {

// One figure per stage, the largest over its replicas.
struct StageFigures {
  explicit StageFigures(int stages)
      : peak_mbs(stages, 0),
        peak_bytes(stages, 0),
        param_bytes(stages, 0),
        opt_bytes(stages, 0),
        rss_bytes(stages, 0),
        data_bytes(stages, 0),
        rss_grown(stages, 0),
        rss_before_training(stages, 0),
        gpu_allocated(stages, 0),
        gpu_reserved(stages, 0),
        model_loads(stages, 0) {}
  std::vector<int> peak_mbs;
  std::vector<int64_t> peak_bytes, param_bytes, opt_bytes, rss_bytes, data_bytes;
  std::vector<int64_t> rss_grown;            // Note [Memory above the start]
  std::vector<int64_t> rss_before_training;  // the peak up to the first step
  // Note [Memory as a GPU holds it] (device.h): zeros on the CPU.
  std::vector<int64_t> gpu_allocated, gpu_reserved;
  std::vector<int> model_loads;  // LoadModel calls: 1 (Note [Stage-local models])
};

struct JobFigures {
  explicit JobFigures(int stages) : stages(stages) {}
  StageFigures stages;
  double bubble = 0, step_ms = 0, median_step_ms = 0;
};

Json RankFigures(const RunStats& stats) {
  return {{"peak_mbs", stats.peak_micro_batches()},
          {"peak_bytes", stats.peak_bytes()},
          {"bubble", stats.BubbleFraction()},
          {"step_ms", stats.MeanStepMs()},
          {"median_step_ms", stats.MedianStepMs()},
          {"param_bytes", stats.parameter_bytes()},
          {"opt_bytes", stats.optimizer_bytes()},
          {"rss_bytes", stats.peak_resident_bytes()},
          {"rss_start_bytes", stats.resident_at_start_bytes()},
          {"rss_before_training_bytes", stats.peak_before_training_bytes()},
          {"data_bytes", stats.data_bytes()},
          {"gpu_allocated_bytes", stats.device_memory().peak_allocated_bytes},
          {"gpu_reserved_bytes", stats.device_memory().peak_reserved_bytes},
          {"model_loads", ModelLoads()}};
}

JobFigures CollectFigures(const std::vector<std::string>& all, const RankGrid& grid, int world) {
  JobFigures f(grid.num_stages());
  StageFigures& st = f.stages;
  auto keep_max = [](auto& v, int s, auto x) { v[s] = std::max(v[s], x); };
  for (int r = 0; r < world; ++r) {
    if (grid.Idle(r)) continue;  // its steps only wait for the loss: no bubble, no peaks
    Json j = Json::parse(all[r]);
    const int s = grid.Of(r).stage;
    keep_max(st.peak_mbs, s, j["peak_mbs"].get<int>());
    keep_max(st.peak_bytes, s, j["peak_bytes"].get<int64_t>());
    keep_max(st.param_bytes, s, j["param_bytes"].get<int64_t>());
    keep_max(st.opt_bytes, s, j["opt_bytes"].get<int64_t>());
    keep_max(st.rss_bytes, s, j["rss_bytes"].get<int64_t>());
    keep_max(st.data_bytes, s, j["data_bytes"].get<int64_t>());
    keep_max(st.rss_grown, s,
             j["rss_bytes"].get<int64_t>() - j.value("rss_start_bytes", int64_t{0}));
    keep_max(st.rss_before_training, s, j.value("rss_before_training_bytes", int64_t{0}));
    keep_max(st.gpu_allocated, s, j.value("gpu_allocated_bytes", int64_t{0}));
    keep_max(st.gpu_reserved, s, j.value("gpu_reserved_bytes", int64_t{0}));
    keep_max(st.model_loads, s, j.value("model_loads", 0));
    f.bubble += j["bubble"].get<double>() / grid.num_active();
    f.step_ms = std::max(f.step_ms, j["step_ms"].get<double>());
    f.median_step_ms = std::max(f.median_step_ms, j["median_step_ms"].get<double>());
  }
  return f;
}

// The planner's peak memory of stage s per device, or -1.
double PlannedStagePeak(const Plan& plan, int s) {
  if (!plan.estimate || s >= static_cast<int>(plan.estimate->stage_peak_memory_bytes.size()))
    return -1;
  return plan.estimate->stage_peak_memory_bytes[s];
}

// Note [Process memory] (format/cluster.h): what the process holds beside its stage.
double PlannedProcessMemory(const Plan& plan) {
  return plan.estimate ? plan.estimate->process_memory_bytes : 0;
}

void PrintSummaryJson(const RankGrid& grid, const Plan& plan, const JobFigures& f,
                      int64_t steps_run, double final_loss, double per_s) {
  const StageFigures& st = f.stages;
  Json stages = Json::array();
  for (int s = 0; s < grid.num_stages(); ++s) {
    Json stage = {{"stage", s},
                  {"replicas", grid.replicas(s)},
                  {"peak_live_micro_batches", st.peak_mbs[s]},
                  {"peak_live_activation_bytes", st.peak_bytes[s]},
                  {"parameter_bytes", st.param_bytes[s]},
                  {"optimizer_state_bytes", st.opt_bytes[s]},  // a rank's own
                  {"shard_optimizer", plan.stages[s].shard_optimizer},
                  {"data_bytes", st.data_bytes[s]},
                  {"peak_resident_bytes", st.rss_bytes[s]},
                  {"peak_resident_above_start_bytes", st.rss_grown[s]},
                  {"peak_resident_before_training_bytes", st.rss_before_training[s]},
                  {"planned_peak_memory_bytes", PlannedStagePeak(plan, s)},
                  {"planned_process_memory_bytes", PlannedProcessMemory(plan)},
                  {"model_loads", st.model_loads[s]}};
    if (st.gpu_reserved[s] > 0) {
      stage["gpu_peak_allocated_bytes"] = st.gpu_allocated[s];
      stage["gpu_peak_reserved_bytes"] = st.gpu_reserved[s];
    }
    stages.push_back(stage);
  }
  Json j = {{"summary",
             {{"steps", steps_run},
              {"final_loss", final_loss},
              {"step_ms", f.step_ms},
              {"median_step_ms", f.median_step_ms},
              {"samples_per_s", per_s},
              {"bubble_fraction", f.bubble},
              {"schedule", ToString(plan.schedule)},
              {"num_micro_batches", plan.num_micro_batches},
              {"stages", stages}}}};
  std::printf("%s\n", j.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
}

// Stage s's memory line: what it holds, its peak, and the plan's estimate beside it.
void PrintStageMemory(const Plan& plan, const StageFigures& st, int s) {
  const double estimate = PlannedStagePeak(plan, s), process = PlannedProcessMemory(plan);
  std::string planned;
  if (estimate >= 0 && process > 0) {
    const double whole = estimate + process;
    planned = fmt::format(
        " (planned peak {:.1f} MiB: the stage's {:.1f} and the process's {:.1f}; peak "
        "resident / planned {:.2f})",
        whole / 1048576.0, estimate / 1048576.0, process / 1048576.0, st.rss_bytes[s] / whole);
  } else if (estimate >= 0) {
    planned = fmt::format(" (planned peak {:.1f} MiB)", estimate / 1048576.0);
  }
  std::printf(
      "    holds parameters %.3f MiB, optimizer state %.3f MiB%s, data %.1f MiB; peak "
      "resident %.1f MiB, %.1f MiB above the process's start%s\n",
      st.param_bytes[s] / 1048576.0, st.opt_bytes[s] / 1048576.0,
      plan.stages[s].shard_optimizer ? " (its shard)" : "", st.data_bytes[s] / 1048576.0,
      st.rss_bytes[s] / 1048576.0, st.rss_grown[s] / 1048576.0, planned.c_str());
  if (st.gpu_reserved[s] > 0) {
    std::printf("    GPU: peak allocated %.1f MiB, peak reserved %.1f MiB (caching allocator)\n",
                st.gpu_allocated[s] / 1048576.0, st.gpu_reserved[s] / 1048576.0);
  }
}

void PrintSummaryText(const RankGrid& grid, const Plan& plan, const JobFigures& f,
                      int64_t steps_run, double final_loss, double per_s) {
  std::printf(
      "done: %lld steps, final loss %.6f, %.1f samples/s (%.2f ms/step), measured "
      "bubble fraction %.3f\n",
      static_cast<long long>(steps_run), final_loss, per_s, f.step_ms, f.bubble);
  const StageFigures& st = f.stages;
  for (int s = 0; s < grid.num_stages(); ++s) {
    std::printf("  stage %d (%d replica%s): peak live activations %d micro-batch%s, %.3f MiB\n", s,
                grid.replicas(s), grid.replicas(s) == 1 ? "" : "s", st.peak_mbs[s],
                st.peak_mbs[s] == 1 ? "" : "es", st.peak_bytes[s] / 1048576.0);
    PrintStageMemory(plan, st, s);
  }
}

}  // namespace

MeasuredRun GatherAndPrintSummary(Communicator& comm, const RankGrid& grid, const Plan& plan,
                                  const TrainOptions& o, const RunStats& stats,
                                  const std::vector<double>& losses, int64_t start_step) {
  auto all = comm.GatherStrings("summary", RankFigures(stats).dump(), 0);
  if (comm.rank() != 0) return {};
  const JobFigures f = CollectFigures(all, grid, comm.size());
  const double per_s = f.step_ms > 0 ? plan.global_batch_size * 1000.0 / f.step_ms : 0;
  const int64_t steps_run = o.steps - start_step;
  const double final_loss = losses.empty() ? 0 : losses.back();
  if (o.log_json) {
    PrintSummaryJson(grid, plan, f, steps_run, final_loss, per_s);
  } else {
    PrintSummaryText(grid, plan, f, steps_run, final_loss, per_s);
  }
  std::fflush(stdout);
  return {f.step_ms, f.bubble, f.median_step_ms};
}

}  // namespace dapple
