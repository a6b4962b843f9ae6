// Note [Checkpoint commit]: rank 0 commits a checkpoint only when every layer was confirmed
// by its writer, and every confirmed file it can see has the confirmed size.
#include "dapple/runtime/checkpoint/checkpoint_commit.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include "dapple/common/error.h"
#include "dapple/runtime/checkpoint/checkpoint.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;

struct Fixture {
  fs::path dir = fs::temp_directory_path() / ("dapple_ckpt_commit_" + std::to_string(::getpid()));
  fs::path step = CheckpointStepDir(dir, 1);
  std::vector<std::string> layers = {"a", "b", "c"};
  std::map<std::string, int64_t> sizes;
  Fixture() {
    fs::remove_all(dir);
    torch::nn::Linear l(2, 2);
    for (const auto& name : layers)
      sizes[name] = SaveLayer(dir, 1, name, *l, nullptr, OptimizerKind::kSgd);
  }
  ~Fixture() { fs::remove_all(dir); }
  // Rank 0 wrote a, rank 1 wrote b and c.
  std::vector<std::string> Reports() {
    return {DescribeWrittenLayers({{"a", sizes["a"]}}),
            DescribeWrittenLayers({{"b", sizes["b"]}, {"c", sizes["c"]}})};
  }
};

std::string Why(const fs::path& step, const std::vector<std::string>& layers,
                const std::vector<std::string>& reports) {
  try {
    VerifyWrittenLayers(step, layers, reports);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointCommit, EveryLayerConfirmedCommits) {
  Fixture f;
  EXPECT_EQ(Why(f.step, f.layers, f.Reports()), "");
  // A writer on another node: rank 0 cannot see its files, and trusts its confirmation.
  fs::remove(LayerFile(f.step, "c"));
  EXPECT_EQ(Why(f.step, f.layers, f.Reports()), "");
}

TEST(CheckpointCommit, AMissingLayerIsDetectedBeforeTheCommit) {
  Fixture f;
  auto reports = f.Reports();
  reports[1] = DescribeWrittenLayers({{"b", f.sizes["b"]}});  // c never confirmed
  std::string why = Why(f.step, f.layers, reports);
  EXPECT_NE(why.find("no rank confirmed writing layer c"), std::string::npos) << why;
  EXPECT_NE(why.find(f.step.string()), std::string::npos) << why;
}

TEST(CheckpointCommit, ATruncatedOrDoublyWrittenLayerIsRefused) {
  Fixture f;
  fs::resize_file(LayerFile(f.step, "b"), f.sizes["b"] - 1);
  std::string why = Why(f.step, f.layers, f.Reports());
  EXPECT_NE(why.find("b.pt"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 1 wrote"), std::string::npos) << why;

  Fixture g;
  auto reports = g.Reports();
  reports[0] = DescribeWrittenLayers({{"a", g.sizes["a"]}, {"b", g.sizes["b"]}});
  why = Why(g.step, g.layers, reports);
  EXPECT_NE(why.find("layer b was written by rank 0 and rank 1"), std::string::npos) << why;
}

}  // namespace
}  // namespace dapple
