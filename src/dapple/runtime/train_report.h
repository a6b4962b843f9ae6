// What a training run reports: rank 0's progress line per step, the measured timeline of
// one iteration (Chrome trace, the simulator's format) and the closing summary
// (throughput, peak live activations per stage, measured bubble fraction).
#pragma once

#include <cstdint>
#include <vector>

#include "dapple/format/plan.h"
#include "dapple/runtime/communicator.h"
#include "dapple/runtime/rank_grid.h"
#include "dapple/runtime/trainer.h"
#include "dapple/sim/timeline.h"

namespace dapple {

// Prints one line per step (or one JSON object per line with --log-json) to stdout.
class ProgressPrinter {
 public:
  ProgressPrinter(const TrainOptions& o, const Plan& plan, int64_t start_step);
  void Step(int64_t step, double loss, double step_ms);

 private:
  const TrainOptions& o_;
  int64_t gbs_, start_;
  double total_ms_ = 0;
  int64_t done_ = 0;
};

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
  // peak resident memory (Note [Stage-local models] in models/model.h).
  void SetMemory(int64_t parameter_bytes, int64_t optimizer_bytes, int64_t peak_resident_bytes) {
    parameter_bytes_ = parameter_bytes;
    optimizer_bytes_ = optimizer_bytes;
    peak_resident_bytes_ = peak_resident_bytes;
  }
  double BubbleFraction() const;
  double MeanStepMs() const;
  int peak_micro_batches() const { return peak_mbs_; }
  int64_t peak_bytes() const { return peak_bytes_; }
  int64_t parameter_bytes() const { return parameter_bytes_; }
  int64_t optimizer_bytes() const { return optimizer_bytes_; }
  int64_t peak_resident_bytes() const { return peak_resident_bytes_; }

 private:
  double bubble_sum_ = 0, step_ms_sum_ = 0;
  int64_t counted_ = 0;
  double first_bubble_ = 0, first_step_ms_ = 0;
  int peak_mbs_ = 0;
  int64_t peak_bytes_ = 0;
  int64_t parameter_bytes_ = 0, optimizer_bytes_ = 0, peak_resident_bytes_ = 0;
};

// Collective: gathers every rank's `events` of the traced step to rank 0, which writes
// them to o.trace_path as one timeline (times relative to the earliest event).
void WriteMeasuredTrace(Communicator& comm, const RankGrid& grid, const Plan& plan,
                        const TrainOptions& o, const std::vector<TimelineEvent>& events);

// Collective: gathers every rank's stats; rank 0 prints the summary.
void GatherAndPrintSummary(Communicator& comm, const RankGrid& grid, const Plan& plan,
                           const TrainOptions& o, const RunStats& stats,
                           const std::vector<double>& losses, int64_t start_step);

}  // namespace dapple
