// Re-computation per layer (`recompute_layers`, Note [Re-computation per layer]) trains as
// one process does in float64 under dapple-a, gpipe and zb-h1 (split backward), with the
// re-computed layers in the middle of a stage, at its start and at the end of the last stage
// (the loss re-computed); a stage that re-computes some layers holds a peak of activations
// between none and the whole stage; and the simulator predicts each rank's peak.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <nlohmann/json.hpp>

#include "train_test_util.h"

namespace dapple::testing {
namespace {

std::string Flags(const fs::path& ckpt) {
  return std::string(kMlpFlags) +
         " --dtype float64 --data synthetic --seed 7 --steps 3 --optimizer sgd --lr 0.1 "
         "--momentum 0.9 --log-json --timeout-s 30 --checkpoint-dir " +
         ckpt.string();
}

// Two stages, fc0..fc1 and fc2..head, m = 2, M = 4; `first` and `second` the layers of
// each that re-compute ("all": the stage's `recompute`).
std::string Plan(const std::string& schedule, const std::vector<std::string>& first,
                 const std::vector<std::string>& second) {
  nlohmann::json j =
      nlohmann::json::parse(PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 2, 4, schedule));
  auto set = [&](nlohmann::json& st, const std::vector<std::string>& layers) {
    if (layers == std::vector<std::string>{"all"})
      st["recompute"] = true;
    else if (!layers.empty())
      st["recompute_layers"] = layers;
  };
  set(j["stages"][0], first);
  set(j["stages"][1], second);
  return j.dump(2);
}

// Trains `plan_json` for 3 steps in a fresh folder; the checkpoint of step 3 in *step3.
RunResult Train(const std::string& name, const std::string& plan_json, int nproc,
                fs::path* step3 = nullptr) {
  fs::path dir = TestDir(name);
  if (step3) *step3 = dir / "ckpt" / "step-3";
  fs::path plan = WritePlan(dir, "plan", plan_json);
  return RunDapple("train " + Flags(dir / "ckpt") + " --plan " + plan.string() + " --nproc " +
                       std::to_string(nproc),
                   dir);
}

class RecomputeLayersEquivalence : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(RecomputeLayersEquivalence, MatchesSingleProcess) {
  const auto& [schedule, variant] = GetParam();
  static fs::path ref_step3;
  static const RunResult ref =
      Train("recompute_ref", PlanJson({{"fc0", "head", {0}}}, 8, 1, "gpipe"), 1, &ref_step3);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  // The middle of stage 0 and the start of stage 1; the start of stage 0 and the end of
  // stage 1 (its loss is re-computed); the whole of stage 0 and all of stage 1 listed.
  const std::vector<std::vector<std::string>> layers[] = {
      {{"fc1"}, {"fc2"}}, {{"fc0"}, {"head"}}, {{"all"}, {"fc2", "head"}}};
  const std::string name = "recompute_" + schedule + "_" + std::to_string(variant);
  fs::path step3;
  RunResult r = Train(name, Plan(schedule, layers[variant][0], layers[variant][1]), 2, &step3);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_LT(MaxRelativeDifference(step3, ref_step3, kMlpLayers), 1e-10);
  auto losses = r.Losses(), ref_losses = ref.Losses();
  ASSERT_EQ(losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(losses[i], ref_losses[i], 1e-10 * ref_losses[i]);
}

INSTANTIATE_TEST_SUITE_P(Schedules, RecomputeLayersEquivalence,
                         ::testing::Combine(::testing::Values("dapple-a", "gpipe", "zb-h1"),
                                            ::testing::Values(0, 1, 2)),
                         [](const auto& info) {
                           std::string s = std::get<0>(info.param);
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s + "_" + std::to_string(std::get<1>(info.param));
                         });

// The simulator's peak of live activations per stage (`dapple simulate --json`, from the
// model's own profile) within 15% of what each training rank measured, under dapple-a and
// zb-h1, for no re-computation, a layer at the end of stage 0, one at its start (which frees
// nothing: its output is the next layer's input), the whole stage and the loss's layer.
// Measured, stage 0 re-computing fc1 holds less than without re-computation and more than
// re-computing both its layers.
TEST(RecomputeLayersMemory, SimulatedPeakWithinFifteenPercentOfMeasured) {
  const fs::path dir = TestDir("recompute_mem_sim");
  const fs::path profile = dir / "profile.json";
  RunResult prof = RunDapple(
      std::string("profile ") + kMlpFlags +
          " --dtype float64 --batch 2 --repeat 1 --warmup 0 --threads 1 -o " + profile.string(),
      dir);
  ASSERT_EQ(prof.exit_code, 0) << prof.err;
  const std::vector<std::vector<std::string>> choices[] = {
      {{}, {}}, {{"fc1"}, {}}, {{"fc0"}, {}}, {{"all"}, {}}, {{}, {"head"}}};
  std::map<std::string, std::array<double, std::size(choices)>> first_stage_peak;
  for (const std::string schedule : {"dapple-a", "zb-h1"}) {
    for (size_t i = 0; i < std::size(choices); ++i) {
      const std::string name = "recompute_mem_sim_" + schedule + "_" + std::to_string(i);
      SCOPED_TRACE(name);
      const std::string plan_json = Plan(schedule, choices[i][0], choices[i][1]);
      RunResult r = Train(name, plan_json, 2);
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
      const fs::path plan = WritePlan(TestDir(name + "_sim"), "plan", plan_json);
      RunResult sim = RunDapple("simulate --profile " + profile.string() +
                                    " --cluster local --json --plan " + plan.string(),
                                dir);
      ASSERT_EQ(sim.exit_code, 0) << sim.err;
      const nlohmann::json simulated = nlohmann::json::parse(sim.out)["stages"];
      first_stage_peak[schedule][i] =
          r.Summary()["stages"][0]["peak_live_activation_bytes"].get<double>();
      for (int s = 0; s < 2; ++s) {
        const double measured =
            r.Summary()["stages"][s]["peak_live_activation_bytes"].get<double>();
        const double predicted = simulated[s]["peak_activation_bytes"].get<double>();
        EXPECT_NEAR(predicted / measured, 1.0, 0.15)
            << "stage " << s << ": simulated " << predicted << ", measured " << measured;
      }
    }
  }
  for (const auto& [schedule, peak] : first_stage_peak) {
    EXPECT_LT(peak[1], peak[0]) << schedule;
    EXPECT_GT(peak[1], peak[3]) << schedule;
  }
}

}  // namespace
}  // namespace dapple::testing
