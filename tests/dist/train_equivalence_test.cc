// `dapple train` under pipelined and replicated plans equals a single-process run: the
// parameters after 3 steps match to 1e-10 (float64), and every stage's peak of live
// activations is K_s micro-batches (M for gpipe, min(S, M) for zb-h1, min(2S - 1, M) for zb-h2:
// PeakInFlight), for every schedule of one chunk per stage.
#include <gtest/gtest.h>

#include <map>

#include "dapple/common/schedule_kind.h"
#include "dapple/models/model.h"
#include "dapple/schedule/schedule.h"
#include "train_test_util.h"

namespace dapple::testing {
namespace {

struct PlanCase {
  std::string name;
  std::vector<StageSpec> stages;
  int m, M;
};

const std::vector<PlanCase>& EquivalenceCases() {
  static const std::vector<PlanCase> cases = {
      {"dp2", {{"fc0", "head", {0, 1}}}, 4, 2},
      {"pipe2", {{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 2, 4},
      // 2:1 replicas, placed out of rank order.
      {"pipe2_2to1", {{"fc0", "fc1", {2, 0}}, {"fc2", "head", {1}}}, 4, 3},
      {"pipe3_121", {{"fc0", "fc0", {0}}, {"fc1", "fc2", {1, 2}}, {"head", "head", {3}}}, 2, 4},
      // m = 5 does not divide among 3 or 2 replicas: slices 2,2,1 -> 3,2.
      {"uneven_3to2", {{"fc0", "fc1", {0, 1, 2}}, {"fc2", "head", {3, 4}}}, 5, 2},
      // Fewer micro-batches than stages: every schedule still runs (nothing waits for a
      // micro-batch that does not exist).
      {"pipe3_m2", {{"fc0", "fc0", {0}}, {"fc1", "fc2", {1}}, {"head", "head", {2}}}, 4, 2},
  };
  return cases;
}

std::string CommonFlags(const fs::path& ckpt) {
  return std::string(kMlpFlags) +
         " --dtype float64 --data synthetic --seed 7 --steps 3 --optimizer sgd --lr 0.1 "
         "--momentum 0.9 --log-json --timeout-s 30 --checkpoint-dir " +
         ckpt.string();
}

// The single-process run of global batch `gbs` (one stage, one device, M = 1), cached.
const RunResult& EquivalenceReference(int gbs, fs::path* ckpt) {
  static std::map<int, std::pair<RunResult, fs::path>> cache;
  auto it = cache.find(gbs);
  if (it == cache.end()) {
    fs::path dir = TestDir("ref" + std::to_string(gbs));
    fs::path plan = WritePlan(dir, "plan", PlanJson({{"fc0", "head", {0}}}, gbs, 1, "gpipe"));
    RunResult r = RunDapple("train " + CommonFlags(dir / "ckpt") + " --plan " + plan.string(), dir);
    it = cache.emplace(gbs, std::make_pair(r, dir / "ckpt")).first;
  }
  *ckpt = it->second.second;
  return it->second.first;
}

class TrainEquivalence : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(TrainEquivalence, MatchesSingleProcessAndHoldsKsActivations) {
  const PlanCase& c = EquivalenceCases()[std::get<0>(GetParam())];
  const std::string schedule = std::get<1>(GetParam());
  int world = 0;
  for (const auto& s : c.stages) world += static_cast<int>(s.devices.size());

  fs::path ref_ckpt;
  const RunResult& ref = EquivalenceReference(c.m * c.M, &ref_ckpt);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;

  fs::path dir = TestDir(c.name + "_" + schedule);
  fs::path plan = WritePlan(dir, "plan", PlanJson(c.stages, c.m, c.M, schedule));
  RunResult r = RunDapple("train " + CommonFlags(dir / "ckpt") + " --plan " + plan.string() +
                              " --nproc " + std::to_string(world),
                          dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  // Same parameters as the single process after 3 steps.
  double diff = MaxRelativeDifference(dir / "ckpt" / "step-3", ref_ckpt / "step-3", kMlpLayers);
  EXPECT_LT(diff, 1e-10) << c.name << " " << schedule;
  // Same loss sequence.
  auto losses = r.Losses(), ref_losses = ref.Losses();
  ASSERT_EQ(losses.size(), 3u);
  ASSERT_EQ(ref_losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(losses[i], ref_losses[i], 1e-10 * ref_losses[i]);
  // Parameters moved from their initial values (the comparison is not vacuous).
  EXPECT_GT(DistanceFromInitial(
                "mlp", {{"input", "8"}, {"hidden", "6"}, {"layers", "3"}, {"classes", "4"}}, 7,
                ref_ckpt / "step-3"),
            1e-4);

  // Peak live activations per stage: K_s micro-batches (M for gpipe, min(S, M) for zb-h1 and
  // min(2S - 1, M) for zb-h2, whose micro-batches live from F to W).
  auto summary = r.Summary();
  ASSERT_TRUE(summary.contains("stages")) << r.out;
  const int S = static_cast<int>(c.stages.size());
  ScheduleKind kind = ParseScheduleKind(schedule);
  for (int s = 0; s < S; ++s) {
    EXPECT_EQ(summary["stages"][s]["peak_live_micro_batches"].get<int>(),
              PeakInFlight(kind, s, S, c.M))
        << "stage " << s;
    EXPECT_GT(summary["stages"][s]["peak_live_activation_bytes"].get<int64_t>(), 0);
  }
  fs::remove_all(dir);
}

// A plan may use fewer devices than the job has processes (the planner leaves devices out
// when they would not pay): the others idle, here rank 0 among them (the one that prints,
// commits checkpoints and writes the trace). Training is unchanged.
TEST(TrainIdleRanks, PlanOnTwoOfFourProcessesMatchesSingleProcess) {
  fs::path ref_ckpt;
  const RunResult& ref = EquivalenceReference(8, &ref_ckpt);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  fs::path dir = TestDir("idle_ranks");
  fs::path plan = WritePlan(
      dir, "plan", PlanJson({{"fc0", "fc1", {3}}, {"fc2", "head", {1}}}, 2, 4, "dapple-a"));
  RunResult r =
      RunDapple("train " + CommonFlags(dir / "ckpt") + " --plan " + plan.string() +
                    " --nproc 4 --trace " + (dir / "trace.json").string() + " --trace-steps 2",
                dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("the plan uses 2 of 4 processes; ranks 0, 2 idle"), std::string::npos)
      << r.err;
  EXPECT_LT(MaxRelativeDifference(dir / "ckpt" / "step-3", ref_ckpt / "step-3", kMlpLayers), 1e-10);
  auto losses = r.Losses(), ref_losses = ref.Losses();
  ASSERT_EQ(losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(losses[i], ref_losses[i], 1e-10 * ref_losses[i]);
  // The idle rank 0 prints the steps: the first one's time is its loss's wait, not the 0 ms of
  // a rank that trains nothing (it includes the first step's warm-up on the training ranks).
  std::vector<double> step_ms;
  for (const auto& j : r.lines)
    if (j.contains("step_ms")) step_ms.push_back(j["step_ms"].get<double>());
  ASSERT_EQ(step_ms.size(), 3u) << r.out;
  EXPECT_GT(step_ms[0], 0.25 * std::max(step_ms[1], step_ms[2])) << r.out;
  auto summary = r.Summary();
  ASSERT_EQ(summary["stages"].size(), 2u) << r.out;
  EXPECT_EQ(summary["stages"][0]["peak_live_micro_batches"].get<int>(), 2);
  const std::string trace = Slurp(dir / "trace.json");
  EXPECT_NE(trace.find("dev 0 (idle)"), std::string::npos);
  EXPECT_NE(trace.find("dev 3 (stage 0, replica 0)"), std::string::npos);
  // --trace-steps 2: the last two steps, each ending in one STEP per training device, and
  // with the time between schedules: one DATA, LOSS and HOST each.
  std::map<int, int> steps_per_track, host_per_track;
  const nlohmann::json parsed = nlohmann::json::parse(trace);
  for (const auto& e : parsed["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    const std::string name = e.value("name", "");
    if (name == "STEP") ++steps_per_track[e["tid"]];
    if (name == "DATA" || name == "LOSS" || name == "HOST") ++host_per_track[e["tid"]];
  }
  EXPECT_EQ(steps_per_track, (std::map<int, int>{{1, 2}, {3, 2}})) << trace;
  EXPECT_EQ(host_per_track, (std::map<int, int>{{1, 6}, {3, 6}})) << trace;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Plans, TrainEquivalence,
                         ::testing::Combine(::testing::Range(0, 6),
                                            ::testing::Values("gpipe", "dapple-a", "dapple-b",
                                                              "zb-h1", "zb-h2")),
                         [](const auto& info) {
                           std::string n = EquivalenceCases()[std::get<0>(info.param)].name + "_" +
                                           std::get<1>(info.param);
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace dapple::testing
