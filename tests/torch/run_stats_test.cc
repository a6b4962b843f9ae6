// RunStats' step times (the mean and the median, the first step left out as warm-up) and the
// `predicted vs measured` line that puts them next to the simulator's estimate.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dapple/format/plan.h"
#include "dapple/runtime/train/train_options.h"
#include "dapple/runtime/train/train_report.h"

namespace dapple {
namespace {

TEST(RunStats, MeanAndMedianLeaveTheFirstStepOut) {
  RunStats one;
  one.AddStep({}, 0, 1, 9.0, /*first=*/true);
  EXPECT_DOUBLE_EQ(one.MeanStepMs(), 9.0) << "the only step counts";
  EXPECT_DOUBLE_EQ(one.MedianStepMs(), 9.0);
  RunStats odd;
  odd.AddStep({}, 0, 1, 100.0, true);
  for (double ms : {3.0, 1.0, 2.0, 10.0, 2.5}) odd.AddStep({}, 0, 1, ms, false);
  EXPECT_DOUBLE_EQ(odd.MeanStepMs(), 18.5 / 5);
  EXPECT_DOUBLE_EQ(odd.MedianStepMs(), 2.5) << "the tail (10) moves the mean, not the median";
  RunStats even;
  for (double ms : {4.0, 1.0, 3.0, 2.0}) even.AddStep({}, 0, 1, ms, false);
  EXPECT_DOUBLE_EQ(even.MedianStepMs(), 2.5);
}

TEST(PredictedVsMeasured, TheMedianStandsBesideTheMean) {
  Plan plan;
  plan.estimate = PlanEstimate{};
  plan.estimate->iteration_ms = 2.0;
  plan.estimate->bubble_fraction = 0.25;
  TrainOptions o;
  o.log_json = true;
  ::testing::internal::CaptureStdout();
  PrintPredictedVsMeasured(plan, o, MeasuredRun{3.0, 0.5, 2.4});
  nlohmann::json j = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  const auto& p = j.at("predicted_vs_measured");
  EXPECT_DOUBLE_EQ(p.at("simulated_step_ms").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(p.at("measured_step_ms").get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(p.at("measured_median_step_ms").get<double>(), 2.4);
  EXPECT_DOUBLE_EQ(p.at("measured_over_simulated").get<double>(), 1.5);
  o.log_json = false;
  ::testing::internal::CaptureStdout();
  PrintPredictedVsMeasured(plan, o, MeasuredRun{3.0, 0.5, 2.4});
  const std::string line = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(line.find("3.00 ms measured (measured/simulated 1.50; the median step 2.40 ms, 1.20)"),
            std::string::npos)
      << line;
}

}  // namespace
}  // namespace dapple
