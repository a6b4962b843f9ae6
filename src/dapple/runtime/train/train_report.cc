// Progress lines, the measured trace and the summary of a training run.
#include "dapple/runtime/train/train_report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "dapple/common/clock.h"
#include "dapple/common/json_util.h"
#include "dapple/format/profile.h"
#include "dapple/runtime/optim/optimizer.h"

namespace dapple {

int64_t LogEvery(int64_t steps) { return std::max<int64_t>(1, steps / 10); }

std::optional<std::string> ProfiledOptimizerMismatch(const Plan& plan, const TrainOptions& o) {
  if (plan.profile.empty()) return std::nullopt;
  std::optional<ProfileSettings> settings;
  try {
    settings = LoadProfile(plan.profile).settings;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string trains = ToString(o.optimizer.kind);
  if (!settings || settings->optimizer.empty() || settings->optimizer == trains)
    return std::nullopt;
  return fmt::format(
      "dapple train: warning: the plan was made from {}, which timed the {} update; this run "
      "trains with {} (profile with --optimizer {} for a plan that counts its update)",
      plan.profile, settings->optimizer, trains, trains);
}

std::optional<std::string> PlannedPrecisionMismatch(const Plan& plan, const TrainOptions& o) {
  if (plan.precision == o.precision) return std::nullopt;
  const std::string trains = ToString(o.precision);
  return fmt::format(
      "dapple train: warning: the plan was made from a {} profile; this run computes in {} "
      "(profile and plan with --precision {} for its times and activation sizes)",
      ToString(plan.precision), trains, trains);
}

ProgressPrinter::ProgressPrinter(const TrainOptions& o, const Plan& plan, int64_t start_step)
    : o_(o),
      gbs_(plan.global_batch_size),
      start_(start_step),
      tty_(isatty(fileno(stdout)) != 0),
      every_(o.log_every > 0 ? o.log_every : LogEvery(o.steps)) {}

void ProgressPrinter::Step(int64_t step, double loss, double step_ms, double grad_norm) {
  total_ms_ += step_ms;
  ++done_;
  double per_s = step_ms > 0 ? gbs_ * 1000.0 / step_ms : 0;
  double eta_s = total_ms_ / done_ * static_cast<double>(o_.steps - step - 1) / 1000.0;
  const bool last = step + 1 == o_.steps;
  const double lr = LearningRateAt(o_.lr_schedule, o_.optimizer.lr, step, o_.steps);
  const bool clips = o_.clip_grad_norm > 0;
  if (o_.log_json) {
    Json j = {
        {"step", step}, {"loss", loss}, {"step_ms", step_ms}, {"samples_per_s", per_s}, {"lr", lr}};
    if (clips) j["grad_norm"] = grad_norm;
    std::printf("%s\n", j.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
    std::fflush(stdout);
    return;
  }
  if (o_.quiet) return;
  // "  lr 0.0003  grad norm 1.234": what a recipe changes, when it does.
  std::string recipe;
  if (o_.lr_schedule.kind != LrScheduleKind::kConstant || o_.lr_schedule.warmup_steps > 0)
    recipe += fmt::format("  lr {:.6g}", lr);
  if (clips) recipe += fmt::format("  grad norm {:.4g}", grad_norm);
  if (tty_) {
    // Redrawn at most ten times a second: a terminal that scrolls slower than the steps
    // run would otherwise slow training down.
    double now = NowMs();
    if (!last && now - last_draw_ms_ < 100) return;
    last_draw_ms_ = now;
    std::printf("\rstep %lld/%lld  loss %.4f%s  %.0f samples/s  %.2f ms/step  ETA %.0f s \x1b[K%s",
                static_cast<long long>(step + 1), static_cast<long long>(o_.steps), loss,
                recipe.c_str(), per_s, step_ms, eta_s, last ? "\n" : "");
  } else if (step == start_ || last || (step + 1) % every_ == 0) {
    std::printf("step %lld/%lld  loss %.6f%s  %.1f samples/s  %.2f ms/step  ETA %.1f s\n",
                static_cast<long long>(step + 1), static_cast<long long>(o_.steps), loss,
                recipe.c_str(), per_s, step_ms, eta_s);
  } else {
    return;
  }
  std::fflush(stdout);
}

void RunStats::AddStep(const std::vector<TimelineEvent>& events, double t0, double t1,
                       double step_ms, bool first) {
  double busy = 0;
  for (const auto& e : events) {
    if (e.category == "forward" || e.category == "backward" || e.category == "weight")
      busy += e.end_ms - e.start_ms;
  }
  double bubble = t1 > t0 ? std::max(0.0, 1.0 - busy / (t1 - t0)) : 0;
  if (first) {
    first_bubble_ = bubble;
    first_step_ms_ = step_ms;
    return;
  }
  bubble_sum_ += bubble;
  step_ms_sum_ += step_ms;
  step_ms_.push_back(step_ms);
  ++counted_;
}

double RunStats::BubbleFraction() const {
  return counted_ > 0 ? bubble_sum_ / counted_ : first_bubble_;
}

double RunStats::MeanStepMs() const {
  return counted_ > 0 ? step_ms_sum_ / counted_ : first_step_ms_;
}

double RunStats::MedianStepMs() const {
  if (step_ms_.empty()) return first_step_ms_;
  std::vector<double> v = step_ms_;
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + n / 2, v.end());
  const double upper = v[n / 2];
  if (n % 2 == 1) return upper;
  return (upper + *std::max_element(v.begin(), v.begin() + n / 2)) / 2;
}

void WriteMeasuredTrace(Communicator& comm, const RankGrid& grid, const Plan& plan,
                        const TrainOptions& o, const std::vector<TimelineEvent>& events) {
  Json mine = Json::array();
  for (const auto& e : events) {
    mine.push_back({e.name, e.category, e.start_ms, e.end_ms, e.stage, e.micro_batch});
  }
  auto all = comm.GatherStrings("trace", mine.dump(), 0);
  if (comm.rank() != 0) return;
  Timeline t;
  t.title = fmt::format("measured: {} {} ({} stages, {} micro-batches)", o.model,
                        ToString(plan.schedule), plan.num_stages(), plan.num_micro_batches);
  double t_min = std::numeric_limits<double>::infinity();
  for (int r = 0; r < comm.size(); ++r) {
    auto sr = grid.Of(r);
    t.device_labels.push_back(
        grid.Idle(r) ? fmt::format("dev {} (idle)", r)
                     : fmt::format("dev {} (stage {}, replica {})", r, sr.stage, sr.replica));
    for (const auto& e : Json::parse(all[r])) {
      TimelineEvent ev{r,
                       e[0].get<std::string>(),
                       e[1].get<std::string>(),
                       e[2].get<double>(),
                       e[3].get<double>(),
                       e[4].get<int>(),
                       e[5].get<int>()};
      t_min = std::min(t_min, ev.start_ms);
      t.events.push_back(ev);
    }
  }
  for (auto& e : t.events) {
    e.start_ms -= t_min;
    e.end_ms -= t_min;
  }
  WriteChromeTrace({t}, o.trace_path);
  if (!o.log_json) std::printf("wrote the measured timeline to %s\n", o.trace_path.c_str());
}

void PrintPredictedVsMeasured(const Plan& plan, const TrainOptions& o, const MeasuredRun& m) {
  if (!plan.estimate || plan.estimate->iteration_ms <= 0 || m.step_ms <= 0) return;
  const PlanEstimate& e = *plan.estimate;
  const double ratio = m.step_ms / e.iteration_ms;
  if (o.log_json) {
    Json j = {{"simulated_step_ms", e.iteration_ms},
              {"measured_step_ms", m.step_ms},
              {"measured_median_step_ms", m.median_step_ms},
              {"measured_over_simulated", ratio},
              {"measured_bubble_fraction", m.bubble_fraction}};
    if (e.bubble_fraction >= 0) j["simulated_bubble_fraction"] = e.bubble_fraction;
    std::printf("%s\n", Json{{"predicted_vs_measured", j}}.dump().c_str());
  } else {
    std::string bubble =
        e.bubble_fraction >= 0 ? fmt::format("{:.3f}", e.bubble_fraction) : std::string("-");
    std::printf(
        "predicted vs measured: step %.2f ms simulated, %.2f ms measured (measured/simulated "
        "%.2f; the median step %.2f ms, %.2f); bubble %s simulated, %.3f measured\n",
        e.iteration_ms, m.step_ms, ratio, m.median_step_ms, m.median_step_ms / e.iteration_ms,
        bubble.c_str(), m.bubble_fraction);
  }
  std::fflush(stdout);
}

}  // namespace dapple
