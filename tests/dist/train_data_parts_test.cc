// Note [Data a stage reads] (models/data.h) in a 3-stage `dapple train` on Fashion-MNIST:
// the first stage maps the image files only, the last stage the label files only, and the
// middle stage no data at all, as the summary's per-stage data bytes report.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "dist/train_test_util.h"

namespace dapple::testing {
namespace {

TEST(TrainDataParts, MiddleStageLoadsNoData) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  fs::path dir = TestDir("data_parts"), cache = dir / "cache";
  fs::path plan = WritePlan(
      dir, "plan",
      PlanJson({{"fc0", "fc0", {0}}, {"fc1", "fc1", {1}}, {"fc2", "head", {2}}}, 4, 2, "dapple-a"));
  RunResult r = RunDapple(
      fmt::format("train --model mlp --opt hidden=6 --opt layers=3 --plan {} --nproc 3 --steps 2 "
                  "--data fashion-mnist --data-cache-dir {} --log-json",
                  plan.string(), cache.string()),
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json stages = r.Summary()["stages"];
  ASSERT_EQ(stages.size(), 3u) << r.out;
  constexpr int64_t kImages = 70000, kPixels = 28 * 28;  // training and test splits
  EXPECT_EQ(stages[0]["data_bytes"].get<int64_t>(), kImages * kPixels) << "images only";
  EXPECT_EQ(stages[1]["data_bytes"].get<int64_t>(), 0) << "the middle stage reads no data";
  EXPECT_EQ(stages[2]["data_bytes"].get<int64_t>(), kImages) << "labels only";
}

}  // namespace
}  // namespace dapple::testing
