// What a training run reports: rank 0's progress line per step, the measured timeline of
// one iteration (Chrome trace, the simulator's format) and the closing summary
// (throughput, peak live activations per stage, measured bubble fraction).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dapple/format/plan.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/device.h"
#include "dapple/runtime/comm/rank_grid.h"
#include "dapple/runtime/train/train_options.h"
#include "dapple/sim/timeline.h"

namespace dapple {

// Rank 0's progress on stdout: with --log-json one JSON object per step; else, on a
// terminal, one line rewritten in place (step, loss, samples/s, ETA; at most ten times a
// second, and the last step); else one line every o.log_every steps (0: LogEvery(steps)),
// the first and the last step; nothing with --quiet. The JSON objects hold the step's
// learning rate, and with --clip-grad-norm its gradient norm, which the lines show too
// (with the rate when it is scheduled).
class ProgressPrinter {
 public:
  ProgressPrinter(const TrainOptions& o, const Plan& plan, int64_t start_step);
  // grad_norm: the step's global gradient norm (ignored without --clip-grad-norm).
  void Step(int64_t step, double loss, double step_ms, double grad_norm);

 private:
  const TrainOptions& o_;
  int64_t gbs_, start_;
  bool tty_;
  int64_t every_;
  double total_ms_ = 0, last_draw_ms_ = -1e300;
  int64_t done_ = 0;
};

// When the plan records the profile it was made from and that profile timed another
// optimizer's update than this run trains with: one warning line for rank 0 to print (the
// plan's step time counts the profiled update), else nullopt. A profile that is gone or
// unreadable says nothing (the plan was checked against the model already).
std::optional<std::string> ProfiledOptimizerMismatch(const Plan& plan, const TrainOptions& o);

// When the plan was made from a profile taken in another precision than this run computes in
// (Plan::precision, Note [Mixed precision]): one warning line for rank 0 to print (the plan's
// times and activation bytes are the other precision's), else nullopt.
std::optional<std::string> PlannedPrecisionMismatch(const Plan& plan, const TrainOptions& o);

// The default interval of progress lines off a terminal: about ten lines a run,
// max(1, steps / 10).
int64_t LogEvery(int64_t steps);

// Note [Memory above the start]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The planner's per-device estimate counts what a stage adds: its parameters, gradients,
// optimizer state and live activations. A process holds more before its stage exists:
// libtorch's code and allocator pools, the communicator's buffers (about 200 MiB here),
// which no plan changes. So the summary reports the peak resident memory whole and
// above the resident memory measured just before the stage is built; the latter is what
// compares with the estimate. The peak up to the first step is reported too: a rank's start
// is libtorch and its own stage, not the whole model (Note [Probing with zeros]).

// One rank's measurements over the run.
class RunStats {
 public:
  // `events` of one step run between t0 and t1 (ms, steady clock); step_ms includes the
  // loss reduction. The first step of a run (warm-up) counts only when it is the only one.
  void AddStep(const std::vector<TimelineEvent>& events, double t0, double t1, double step_ms,
               bool first);
  void SetPeaks(int micro_batches, int64_t bytes) {
    peak_mbs_ = micro_batches;
    peak_bytes_ = bytes;
  }
  // What this rank holds: its stage's parameters and optimizer state, and the process's
  // peak resident memory (Note [Stage-local models] in models/model.h), and its resident
  // memory before it built its stage: libtorch, the communicator and the data, which the
  // planner's per-device estimate does not count (Note [Memory above the start]).
  void SetMemory(int64_t parameter_bytes, int64_t optimizer_bytes, int64_t peak_resident_bytes,
                 int64_t resident_at_start_bytes) {
    parameter_bytes_ = parameter_bytes;
    optimizer_bytes_ = optimizer_bytes;
    peak_resident_bytes_ = peak_resident_bytes;
    resident_at_start_bytes_ = resident_at_start_bytes;
  }
  // The peak resident memory up to the first step: libtorch, the stage, its optimizer and
  // data, and whatever loading left resident (Note [Probing with zeros] in
  // models/script_model.cc).
  void SetPeakBeforeTraining(int64_t bytes) { peak_before_training_bytes_ = bytes; }
  // The caching allocator's peaks on a GPU (Note [Memory as a GPU holds it], device.h).
  void SetDeviceMemory(const DeviceMemory& m) { device_memory_ = m; }
  const DeviceMemory& device_memory() const { return device_memory_; }
  // The bytes of the data set this rank holds or maps (Dataset::HeldBytes; 0 on the
  // stages between the first and the last, Note [Data a stage reads] in models/data.h).
  void SetDataBytes(int64_t bytes) { data_bytes_ = bytes; }
  double BubbleFraction() const;
  double MeanStepMs() const;
  // The median of the counted steps' times (the first one's when it is the only one): the
  // typical step, without the tail that other work on shared cores adds to the mean.
  double MedianStepMs() const;
  int peak_micro_batches() const { return peak_mbs_; }
  int64_t peak_bytes() const { return peak_bytes_; }
  int64_t parameter_bytes() const { return parameter_bytes_; }
  int64_t optimizer_bytes() const { return optimizer_bytes_; }
  int64_t peak_resident_bytes() const { return peak_resident_bytes_; }
  int64_t resident_at_start_bytes() const { return resident_at_start_bytes_; }
  int64_t peak_before_training_bytes() const { return peak_before_training_bytes_; }
  int64_t data_bytes() const { return data_bytes_; }

 private:
  double bubble_sum_ = 0, step_ms_sum_ = 0;
  std::vector<double> step_ms_;  // the counted steps
  int64_t counted_ = 0;
  double first_bubble_ = 0, first_step_ms_ = 0;
  int peak_mbs_ = 0;
  int64_t peak_bytes_ = 0;
  int64_t parameter_bytes_ = 0, optimizer_bytes_ = 0, peak_resident_bytes_ = 0;
  int64_t resident_at_start_bytes_ = 0;
  int64_t peak_before_training_bytes_ = 0;
  int64_t data_bytes_ = 0;
  DeviceMemory device_memory_;
};

// Collective: gathers every rank's `events` of the traced step to rank 0, which writes
// them to o.trace_path as one timeline (times relative to the earliest event).
void WriteMeasuredTrace(Communicator& comm, const RankGrid& grid, const Plan& plan,
                        const TrainOptions& o, const std::vector<TimelineEvent>& events);

// What the summary measured over the job (on rank 0; zeros elsewhere).
struct MeasuredRun {
  double step_ms = 0;          // the slowest rank's mean step time
  double bubble_fraction = 0;  // the mean over the ranks that train
  double median_step_ms = 0;   // the slowest rank's median step time
};

// Collective: gathers every rank's stats; rank 0 prints the summary and returns the figures
// (train_summary.cc). On a GPU each stage's line adds the caching allocator's peaks.
MeasuredRun GatherAndPrintSummary(Communicator& comm, const RankGrid& grid, const Plan& plan,
                                  const TrainOptions& o, const RunStats& stats,
                                  const std::vector<double>& losses, int64_t start_step);

// Rank 0, when the plan carries the simulator's estimate: one line with the simulated and
// the measured step time and bubble fraction side by side and the ratio of the step times
// (a JSON object {"predicted_vs_measured": ...} with --log-json). Nothing otherwise.
void PrintPredictedVsMeasured(const Plan& plan, const TrainOptions& o, const MeasuredRun& m);

}  // namespace dapple
