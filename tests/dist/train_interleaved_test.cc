// `dapple train` under interleaved 1F1B and zb-v plans (virtual_stages v = 2) equals a
// single-process run: the parameters after 3 steps match to 1e-10 (float64), also with groups of
// different widths (split-concat between chunks), with the allreduce overlapped or not, and across
// resumes between an interleaved plan and a plain dapple-a plan in both directions. Each
// device group's peak of live activations is PeakInFlight's (chunk, micro-batch) count.
// --eval through the chunks equals one process's evaluation.
#include <gtest/gtest.h>

#include <map>

#include "dapple/common/schedule_kind.h"
#include "dapple/schedule/schedule.h"
#include "train_test_util.h"

namespace dapple::testing {
namespace {

// InterleavedFlags of every run but the step count.
std::string InterleavedFlags(const fs::path& ckpt, int steps) {
  return std::string(kMlpFlags) +
         " --dtype float64 --data synthetic --seed 7 --optimizer sgd --lr 0.1 --momentum 0.9 "
         "--log-json --timeout-s 30 --checkpoint-dir " +
         ckpt.string() + " --steps " + std::to_string(steps);
}

// `stages` lists the S x v chunks in model order; `chunked`: the schedule with v > 1.
fs::path WriteChunkedPlan(const fs::path& dir, const std::vector<StageSpec>& stages, int m, int M,
                          int v, bool overlap = true, const std::string& chunked = "interleaved") {
  nlohmann::json j = nlohmann::json::parse(PlanJson(stages, m, M, v > 1 ? chunked : "dapple-a"));
  if (v > 1) j["virtual_stages"] = v;
  j["allreduce_overlap"] = overlap;
  return WritePlan(dir, "plan", j.dump(2));
}

// The single-process run of global batch `gbs` over 3 steps (one stage, M = 1), cached.
const RunResult& InterleavedReference(int gbs, fs::path* ckpt) {
  static std::map<int, std::pair<RunResult, fs::path>> cache;
  auto it = cache.find(gbs);
  if (it == cache.end()) {
    fs::path dir = TestDir("iref" + std::to_string(gbs));
    fs::path plan = WritePlan(dir, "plan", PlanJson({{"fc0", "head", {0}}}, gbs, 1, "gpipe"));
    RunResult r =
        RunDapple("train " + InterleavedFlags(dir / "ckpt", 3) + " --plan " + plan.string(), dir);
    it = cache.emplace(gbs, std::make_pair(r, dir / "ckpt")).first;
  }
  *ckpt = it->second.second;
  return it->second.first;
}

void ExpectSameAsReference(const RunResult& r, const fs::path& ckpt, int gbs,
                           size_t losses_from = 0) {
  fs::path ref_ckpt;
  const RunResult& ref = InterleavedReference(gbs, &ref_ckpt);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  EXPECT_LT(MaxRelativeDifference(ckpt / "step-3", ref_ckpt / "step-3", kMlpLayers), 1e-10);
  auto losses = r.Losses(), ref_losses = ref.Losses();
  ASSERT_EQ(ref_losses.size(), 3u);
  ASSERT_EQ(losses.size(), 3u - losses_from) << r.out;
  for (size_t i = 0; i < losses.size(); ++i)
    EXPECT_NEAR(losses[i], ref_losses[losses_from + i], 1e-10 * ref_losses[losses_from + i]);
}

struct ChunkCase {
  std::string name;
  std::vector<StageSpec> chunks;  // S x 2, model order
  int m, M;
  bool overlap;
  std::string flags;  // more flags of the run
};

class TrainInterleaved : public ::testing::TestWithParam<int> {};

const std::vector<ChunkCase>& ChunkCases() {
  static const std::vector<ChunkCase> cases = {
      // S = 2, v = 2: rank 0 holds fc0 and fc2, rank 1 fc1 and head.
      {"s2v2",
       {{"fc0", "fc0", {0}}, {"fc1", "fc1", {1}}, {"fc2", "fc2", {0}}, {"head", "head", {1}}},
       2,
       4,
       true,
       ""},
      // Groups of 1 and 2 ranks: every chunk boundary is a 1 -> 2 or 2 -> 1 split-concat;
      // m = 3 splits 2 + 1. With and without the overlapped allreduce; the second also
      // re-computes every chunk's forward in its backward.
      {"s2v2_1to2",
       {{"fc0", "fc0", {0}}, {"fc1", "fc1", {1, 2}}, {"fc2", "fc2", {0}}, {"head", "head", {1, 2}}},
       3,
       4,
       true,
       ""},
      {"s2v2_2to1_no_overlap_recompute",
       {{"fc0", "fc0", {2, 0}}, {"fc1", "fc1", {1}}, {"fc2", "fc2", {2, 0}}, {"head", "head", {1}}},
       3,
       2,
       false,
       " --recompute"},
  };
  return cases;
}

// Trains case `c` (S = 2 groups, v = 2) under `schedule` for 3 steps: equal to one process,
// each group's peak of live activations PeakInFlight's.
void ExpectChunkedRunMatches(const ChunkCase& c, const std::string& schedule, ScheduleKind kind) {
  const int S = 2, v = 2;
  int world = 0;
  for (int g = 0; g < S; ++g) world += static_cast<int>(c.chunks[g].devices.size());
  const std::string name = schedule + "_" + c.name + "_world" + std::to_string(world);
  SCOPED_TRACE(name);
  fs::path dir = TestDir(name);
  fs::path plan = WriteChunkedPlan(dir, c.chunks, c.m, c.M, v, c.overlap, schedule);
  RunResult r = RunDapple("train " + InterleavedFlags(dir / "ckpt", 3) + " --plan " +
                              plan.string() + " --nproc " + std::to_string(world) + c.flags,
                          dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ExpectSameAsReference(r, dir / "ckpt", c.m * c.M);
  auto summary = r.Summary();
  ASSERT_EQ(summary["stages"].size(), static_cast<size_t>(S)) << r.out;
  for (int g = 0; g < S; ++g) {
    EXPECT_EQ(summary["stages"][g]["peak_live_micro_batches"].get<int>(),
              PeakInFlight(kind, g, S, c.M, v))
        << "group " << g;
  }
  fs::remove_all(dir);
}

TEST_P(TrainInterleaved, MatchesSingleProcessAndHoldsPeakInFlight) {
  ExpectChunkedRunMatches(ChunkCases()[GetParam()], "interleaved", ScheduleKind::kInterleaved);
}

INSTANTIATE_TEST_SUITE_P(Plans, TrainInterleaved, ::testing::Range(0, 3),
                         [](const auto& info) { return ChunkCases()[info.param].name; });

// Checkpoints are per layer: 2 steps under one plan, the third resumed under the other.
// `chunked`: interleaved (looped chunks) or zb-v (a V).
void ResumeAcross(bool chunked_first, const std::string& chunked = "interleaved") {
  const bool v_shape = chunked == "zb-v";
  const std::vector<StageSpec> chunks = {{"fc0", "fc0", {0}},
                                         {"fc1", "fc1", {1}},
                                         {"fc2", "fc2", {v_shape ? 1 : 0}},
                                         {"head", "head", {v_shape ? 0 : 1}}};
  const std::vector<StageSpec> plain = {{"fc0", "fc1", {0}}, {"fc2", "head", {1}}};
  fs::path dir = TestDir(chunked + (chunked_first ? "_resume_from" : "_resume_to"));
  fs::path a = dir / "a", b = dir / "b";
  fs::create_directories(a);
  fs::create_directories(b);
  fs::path first = chunked_first ? WriteChunkedPlan(a, chunks, 2, 4, 2, true, chunked)
                                 : WriteChunkedPlan(a, plain, 2, 4, 1);
  fs::path second = chunked_first ? WriteChunkedPlan(b, plain, 2, 4, 1)
                                  : WriteChunkedPlan(b, chunks, 2, 4, 2, true, chunked);
  RunResult r1 = RunDapple(
      "train " + InterleavedFlags(dir / "ckpt", 2) + " --plan " + first.string() + " --nproc 2", a);
  ASSERT_EQ(r1.exit_code, 0) << r1.out << r1.err;
  RunResult r2 = RunDapple("train " + InterleavedFlags(dir / "ckpt", 3) + " --plan " +
                               second.string() + " --nproc 2 --resume",
                           b);
  ASSERT_EQ(r2.exit_code, 0) << r2.out << r2.err;
  ExpectSameAsReference(r2, dir / "ckpt", 8, /*losses_from=*/2);
  fs::remove_all(dir);
}

TEST(TrainInterleavedResume, InterleavedCheckpointResumesUnderDappleA) { ResumeAcross(true); }
TEST(TrainInterleavedResume, DappleACheckpointResumesUnderInterleaved) { ResumeAcross(false); }

// --eval runs the held-out set through the chunks (virtual stage 0 on group 0, 1 on group 1,
// 2 back on group 0, ...) and gives what one process gives after the same training: 300
// samples in two chunks of rows, groups of 1 and 2 ranks.
TEST(TrainInterleavedEval, HeldOutLossEqualsOneProcess) {
  fs::path dir = TestDir("interleaved_eval");
  const std::string eval = " --eval --eval-samples 300";
  fs::path plan = WriteChunkedPlan(
      dir,
      {{"fc0", "fc0", {0}}, {"fc1", "fc1", {1, 2}}, {"fc2", "fc2", {0}}, {"head", "head", {1, 2}}},
      3, 4, 2);
  RunResult r = RunDapple("train " + InterleavedFlags(dir / "ckpt", 3) + " --plan " +
                              plan.string() + " --nproc 3" + eval,
                          dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  fs::path one = WritePlan(dir, "one", PlanJson({{"fc0", "head", {0}}}, 12, 1, "gpipe"));
  RunResult ref = RunDapple(
      "train " + InterleavedFlags(dir / "ckpt1", 3) + " --plan " + one.string() + eval, dir);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  nlohmann::json e = r.Eval(), want = ref.Eval();
  ASSERT_TRUE(e.is_object()) << r.out;
  ASSERT_TRUE(want.is_object()) << ref.out;
  EXPECT_EQ(e["test_samples"].get<int64_t>(), 300);
  EXPECT_NEAR(e["loss"].get<double>(), want["loss"].get<double>(),
              1e-10 * want["loss"].get<double>());
  ASSERT_EQ(e.contains("accuracy"), want.contains("accuracy"));
  if (want.contains("accuracy")) {
    EXPECT_DOUBLE_EQ(e["accuracy"].get<double>(), want["accuracy"].get<double>());
  }
  fs::remove_all(dir);
}

// V-shape plans (zb-v, v-half, v-min; Note [V placement]: chunk 0 of group g is virtual stage
// g, chunk 1 is 2S-1-g): the last group hands activations and gradients between its own two chunks
// (Note [Messages to oneself]) and group 0 reads both the inputs and the targets. Equal to one
// process with groups of one and of two ranks (split-concat into and out of the pair);
// each group's peak of live activations is PeakInFlight's.
TEST(TrainVShape, MatchesSingleProcessAndHoldsPeakInFlight) {
  struct VCase {
    ChunkCase chunked;
    std::string schedule;
    ScheduleKind kind;
  };
  const std::vector<StageSpec> ones = {
      {"fc0", "fc0", {0}}, {"fc1", "fc1", {1}}, {"fc2", "fc2", {1}}, {"head", "head", {0}}};
  const std::vector<StageSpec> one_two = {
      {"fc0", "fc0", {0}}, {"fc1", "fc1", {1, 2}}, {"fc2", "fc2", {1, 2}}, {"head", "head", {0}}};
  const std::vector<VCase> cases = {
      {{"s2", ones, 2, 4, true, ""}, "zb-v", ScheduleKind::kZbV},
      {{"s2_1to2_no_overlap", one_two, 3, 4, false, ""}, "zb-v", ScheduleKind::kZbV},
      {{"s2", ones, 2, 4, true, ""}, "v-half", ScheduleKind::kVHalf},
      {{"s2_1to2", one_two, 3, 4, true, ""}, "v-min", ScheduleKind::kVMin},
  };
  for (const VCase& vc : cases) ExpectChunkedRunMatches(vc.chunked, vc.schedule, vc.kind);
}

TEST(TrainVShapeResume, VShapeCheckpointResumesUnderDappleA) { ResumeAcross(true, "zb-v"); }
TEST(TrainVShapeResume, DappleACheckpointResumesUnderVShape) { ResumeAcross(false, "zb-v"); }

}  // namespace
}  // namespace dapple::testing
