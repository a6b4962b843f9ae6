// The allreduce overlapped with the last backward (plan `allreduce_overlap`, the default)
// and `--no-overlap` both train exactly like a single process (float64, 1e-10), with one
// bucket per layer (a tiny --bucket-mb) as well as one bucket for the whole stage; the
// measured trace shows the buckets as "AR b<k>" and the first starts inside the last B.
#include <gtest/gtest.h>

#include <map>

#include "train_test_util.h"

namespace dapple::testing {
namespace {

// About 52 bytes: every MLP layer (at least 28 float64 parameters) is a bucket of its own.
constexpr const char* kTinyBuckets = " --bucket-mb 0.00005";

std::string OverlapFlags(const fs::path& dir) {
  return std::string(kMlpFlags) +
         " --dtype float64 --data synthetic --seed 7 --steps 3 --optimizer sgd --lr 0.1 "
         "--momentum 0.9 --log-json --timeout-s 30 --checkpoint-dir " +
         (dir / "ckpt").string();
}

// Single-process run of global batch `gbs`, cached; returns its checkpoint folder.
fs::path OverlapReference(int gbs) {
  static std::map<int, fs::path> cache;
  auto it = cache.find(gbs);
  if (it != cache.end()) return it->second;
  fs::path dir = TestDir("overlap_ref" + std::to_string(gbs));
  fs::path plan = WritePlan(dir, "plan", PlanJson({{"fc0", "head", {0}}}, gbs, 1, "gpipe"));
  RunResult r = RunDapple("train " + OverlapFlags(dir) + " --plan " + plan.string(), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return cache.emplace(gbs, dir / "ckpt").first->second;
}

struct OverlapCase {
  std::string name;
  std::vector<StageSpec> stages;
  int m, M;
  std::string extra;  // train flags
};

const std::vector<OverlapCase>& OverlapCases() {
  static const std::vector<OverlapCase> cases = {
      {"dp2_tiny", {{"fc0", "head", {0, 1}}}, 4, 2, kTinyBuckets},
      {"dp2_no_overlap", {{"fc0", "head", {0, 1}}}, 4, 2, " --no-overlap"},
      {"dp2_no_overlap_tiny",
       {{"fc0", "head", {0, 1}}},
       4,
       2,
       std::string(" --no-overlap") + kTinyBuckets},
      {"pipe2_2to1_tiny", {{"fc0", "fc1", {2, 0}}, {"fc2", "head", {1}}}, 4, 3, kTinyBuckets},
      {"uneven_3to2_tiny",
       {{"fc0", "fc1", {0, 1, 2}}, {"fc2", "head", {3, 4}}},
       5,
       2,
       kTinyBuckets},
      {"uneven_3to2_no_overlap",
       {{"fc0", "fc1", {0, 1, 2}}, {"fc2", "head", {3, 4}}},
       5,
       2,
       " --no-overlap"},
  };
  return cases;
}

class TrainOverlap : public ::testing::TestWithParam<int> {};

TEST_P(TrainOverlap, MatchesSingleProcess) {
  const OverlapCase& c = OverlapCases()[GetParam()];
  int world = 0;
  for (const auto& s : c.stages) world += static_cast<int>(s.devices.size());
  fs::path ref = OverlapReference(c.m * c.M);
  fs::path dir = TestDir(c.name);
  fs::path plan = WritePlan(dir, "plan", PlanJson(c.stages, c.m, c.M, "dapple-b"));
  RunResult r = RunDapple("train " + OverlapFlags(dir) + " --plan " + plan.string() + " --nproc " +
                              std::to_string(world) + c.extra,
                          dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_LT(MaxRelativeDifference(dir / "ckpt" / "step-3", ref / "step-3", kMlpLayers), 1e-10)
      << c.name;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Plans, TrainOverlap, ::testing::Range(0, 6),
                         [](const auto& info) { return OverlapCases()[info.param].name; });

// The "AR b<k>" events of every rank in a measured trace, by rank; and each rank's last B.
struct TraceFacts {
  std::map<int, std::vector<std::pair<std::string, double>>> buckets;  // name, start (us)
  std::map<int, double> last_b_end;                                    // us
  std::map<int, int> plain_ar;                                         // "AR" events
};

TraceFacts ReadTrace(const fs::path& path) {
  TraceFacts f;
  nlohmann::json doc = nlohmann::json::parse(Slurp(path));
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string name = e["name"];
    const int tid = e["tid"];
    const double ts = e["ts"], dur = e["dur"];
    if (name.rfind("AR b", 0) == 0) f.buckets[tid].push_back({name, ts});
    if (name == "AR") ++f.plain_ar[tid];
    if (name[0] == 'B') f.last_b_end[tid] = std::max(f.last_b_end[tid], ts + dur);
  }
  return f;
}

TEST(TrainOverlapTrace, BucketsAppearAndStartInsideTheLastBackward) {
  fs::path dir = TestDir("overlap_trace");
  fs::path plan = WritePlan(dir, "plan", PlanJson({{"fc0", "head", {0, 1}}}, 4, 2, "dapple-b"));
  const std::string base = "train " + OverlapFlags(dir) + " --plan " + plan.string() + " --nproc 2";
  RunResult r = RunDapple(base + kTinyBuckets + " --trace " + (dir / "on.json").string(), dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  TraceFacts on = ReadTrace(dir / "on.json");
  ASSERT_EQ(on.buckets.size(), 2u);
  for (const auto& [rank, bs] : on.buckets) {
    // fc0, fc1, fc2, head: one bucket each, bucket 0 = head (the last layer).
    ASSERT_EQ(bs.size(), 4u) << "rank " << rank;
    for (size_t k = 0; k < bs.size(); ++k) EXPECT_EQ(bs[k].first, "AR b" + std::to_string(k));
    // Bucket 0 (head) is launched by the hook, before the last backward has finished.
    EXPECT_LT(bs[0].second, on.last_b_end.at(rank)) << "rank " << rank;
    // Launched in order.
    for (size_t k = 1; k < bs.size(); ++k) EXPECT_LE(bs[k - 1].second, bs[k].second);
  }

  r = RunDapple(base + kTinyBuckets + " --no-overlap --trace " + (dir / "off.json").string(), dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  TraceFacts off = ReadTrace(dir / "off.json");
  EXPECT_TRUE(off.buckets.empty());
  EXPECT_EQ(off.plain_ar.size(), 2u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dapple::testing
