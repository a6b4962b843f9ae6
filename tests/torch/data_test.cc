// Data sets: seeded determinism, shuffled epochs that cover every sample once, slicing,
// and the real data sets (Fashion-MNIST, kjv) where their Debian packages are installed.
#include "dapple/models/data.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "dapple/common/error.h"
#include "dapple/models/data_internal.h"
#include "dapple/models/model.h"

namespace dapple {
namespace {

std::filesystem::path TempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("dapple_data_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(Synthetic, SameSeedAndStepSameBatch) {
  Model m = BuildModel("mlp", {{"input", "6"}, {"classes", "3"}}, 1);
  auto a = MakeDataset("synthetic", m, 9, "")->GlobalBatch(3, 5);
  auto b = MakeDataset("synthetic", m, 9, "")->GlobalBatch(3, 5);
  auto c = MakeDataset("synthetic", m, 9, "")->GlobalBatch(4, 5);
  auto d = MakeDataset("synthetic", m, 8, "")->GlobalBatch(3, 5);
  EXPECT_TRUE(torch::equal(a.inputs, b.inputs));
  EXPECT_TRUE(torch::equal(a.targets, b.targets));
  EXPECT_FALSE(torch::equal(a.inputs, c.inputs));
  EXPECT_FALSE(torch::equal(a.inputs, d.inputs));
  EXPECT_EQ(a.inputs.sizes(), torch::IntArrayRef({5, 6}));
  EXPECT_EQ(a.targets.sizes(), torch::IntArrayRef({5}));
  EXPECT_GE(a.targets.min().item<int64_t>(), 0);
  EXPECT_LT(a.targets.max().item<int64_t>(), 3);
}

TEST(Synthetic, TokenModels) {
  Model gpt = BuildModel("gpt", {{"seq", "7"}, {"vocab", "11"}}, 1);
  auto b = MakeDataset("synthetic", gpt, 1, "")->GlobalBatch(0, 3);
  EXPECT_EQ(b.inputs.scalar_type(), torch::kInt64);
  EXPECT_EQ(b.inputs.sizes(), torch::IntArrayRef({3, 7}));
  EXPECT_LT(b.inputs.max().item<int64_t>(), 11);
  EXPECT_EQ(b.targets.sizes(), torch::IntArrayRef({3, 7}));
  Model bert = BuildModel("bert", {{"seq", "5"}, {"vocab", "20"}, {"classes", "3"}}, 1);
  auto c = MakeDataset("synthetic", bert, 1, "")->GlobalBatch(0, 4);
  EXPECT_EQ(c.targets.sizes(), torch::IntArrayRef({4}));
  EXPECT_LT(c.targets.max().item<int64_t>(), 3);
  EXPECT_EQ(c.inputs.max().item<int64_t>() < 20, true);
}

TEST(Synthetic, Float64Models) {
  Model m = BuildModel("mlp", {{"input", "4"}}, 1, torch::kFloat64);
  EXPECT_EQ(MakeDataset("synthetic", m, 1, "")->GlobalBatch(0, 2).inputs.scalar_type(),
            torch::kFloat64);
}

TEST(InMemory, EpochsArePermutationsAndDeterministic) {
  torch::Tensor x = torch::arange(10, torch::kLong);
  internal::InMemoryDataset a({x.view({10, 1}), x}, {}, 4), b({x.view({10, 1}), x}, {}, 4),
      c({x.view({10, 1}), x}, {}, 5);
  std::vector<torch::Tensor> seen;
  for (int step = 0; step < 5; ++step) {  // 5 x 4 = two epochs exactly
    Batch ba = a.GlobalBatch(step, 4), bb = b.GlobalBatch(step, 4);
    EXPECT_TRUE(torch::equal(ba.inputs.flatten(), ba.targets));
    EXPECT_TRUE(torch::equal(ba.targets, bb.targets));
    seen.push_back(ba.targets);
  }
  torch::Tensor all = torch::cat(seen);
  EXPECT_TRUE(torch::equal(std::get<0>(all.slice(0, 0, 10).sort()), x));
  EXPECT_TRUE(torch::equal(std::get<0>(all.slice(0, 10, 20).sort()), x));
  EXPECT_FALSE(torch::equal(all.slice(0, 0, 10), all.slice(0, 10, 20)));  // fresh shuffle
  EXPECT_FALSE(torch::equal(c.GlobalBatch(0, 10).targets, a.GlobalBatch(0, 10).targets));
  // Random access: step 3 alone equals step 3 after the others.
  internal::InMemoryDataset d({x.view({10, 1}), x}, {}, 4);
  EXPECT_TRUE(torch::equal(d.GlobalBatch(3, 4).targets, seen[3]));
}

TEST(Slice, RowsOfBothTensors) {
  Batch b{torch::arange(12).view({6, 2}), torch::arange(6)};
  Batch s = SliceBatch(b, 2, 5);
  EXPECT_TRUE(torch::equal(s.targets, torch::arange(2, 5)));
  EXPECT_TRUE(torch::equal(s.inputs, torch::arange(4, 10).view({3, 2})));
}

TEST(Datasets, UnknownNameListsKnownOnes) {
  Model m = BuildModel("mlp", {}, 1);
  try {
    MakeDataset("cifar", m, 1, "");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fashion-mnist"), std::string::npos);
  }
}

TEST(FashionMnist, MissingPackageNamesIt) {
  Model m = BuildModel("mlp", {}, 1);
  try {
    internal::MakeFashionMnistFrom(m, 1, TempDir("missing"), "/nonexistent/fashion-mnist");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("install the Debian package dataset-fashion-mnist"),
              std::string::npos)
        << e.what();
  }
}

TEST(FashionMnist, WrongModelShape) {
  Model m = BuildModel("mlp", {{"input", "100"}}, 1);
  EXPECT_THROW(MakeDataset("fashion-mnist", m, 1, TempDir("shape")), InputError);
}

TEST(FashionMnist, LoadsAndCaches) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto cache = TempDir("fashion");
  Model m = BuildModel("mlp", {}, 1);
  auto ds = MakeDataset("fashion-mnist", m, 1, cache);
  EXPECT_EQ(ds->size(), 60000);
  EXPECT_TRUE(std::filesystem::exists(cache / "fashion-mnist" / "train-images-idx3-ubyte"));
  Batch b = ds->GlobalBatch(0, 32);
  EXPECT_EQ(b.inputs.sizes(), torch::IntArrayRef({32, 784}));
  EXPECT_EQ(b.targets.max().item<int64_t>() < 10, true);
  Batch test = ds->TestSet();
  EXPECT_EQ(test.inputs.size(0), 10000);
  EXPECT_NEAR(test.inputs.mean().item<double>(), 0.0, 0.05);  // standardised
  // Served from the cache the second time, identically.
  auto again = MakeDataset("fashion-mnist", m, 1, cache);
  EXPECT_TRUE(torch::equal(again->GlobalBatch(0, 32).inputs, b.inputs));
  std::filesystem::remove_all(cache);
}

// Note [Data a stage reads]: a first stage's data set maps only the image files, a last
// stage's only the label files, and what they return equals the whole data set's.
TEST(FashionMnist, EachPartReadsOnlyItsFiles) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto cache = TempDir("fashion_parts");
  Model m = BuildModel("mlp", {}, 1);
  auto both = MakeDataset("fashion-mnist", m, 1, cache);
  auto inputs = MakeDataset("fashion-mnist", m, 1, cache, {}, DataParts{true, false});
  auto targets = MakeDataset("fashion-mnist", m, 1, cache, {}, DataParts{false, true});
  constexpr int64_t kImages = 70000, kPixels = 28 * 28;  // training and test splits
  EXPECT_EQ(both->HeldBytes(), kImages * kPixels + kImages);
  EXPECT_EQ(inputs->HeldBytes(), kImages * kPixels);
  EXPECT_EQ(targets->HeldBytes(), kImages);
  EXPECT_EQ(inputs->size(), 60000);
  EXPECT_EQ(targets->size(), 60000);
  for (int64_t step : {0, 250}) {  // 250: the second epoch, reshuffled
    Batch b = both->GlobalBatch(step, 256), i = inputs->GlobalBatch(step, 256),
          t = targets->GlobalBatch(step, 256);
    EXPECT_TRUE(torch::equal(i.inputs, b.inputs));
    EXPECT_FALSE(i.targets.defined());
    EXPECT_TRUE(torch::equal(t.targets, b.targets));
    EXPECT_FALSE(t.inputs.defined());
  }
  EXPECT_TRUE(torch::equal(inputs->TestSet().inputs, both->TestSet().inputs));
  EXPECT_EQ(targets->TestSet().rows(), 10000);
  std::filesystem::remove_all(cache);
}

TEST(Kjv, NextCharacterTargets) {
  if (!std::filesystem::exists("/usr/bin/bible")) GTEST_SKIP() << "bible-kjv not installed";
  auto cache = TempDir("kjv");
  Model m = BuildModel("gpt", {{"seq", "16"}}, 1);
  auto ds = MakeDataset("kjv", m, 1, cache);
  EXPECT_GT(ds->size(), 200000);  // 4.3 MB of text / 16
  Batch b = ds->GlobalBatch(7, 8);
  EXPECT_TRUE(torch::equal(b.inputs.slice(1, 1), b.targets.slice(1, 0, 15)));
  EXPECT_LT(b.inputs.max().item<int64_t>(), 128);
  EXPECT_GT(ds->TestSet().inputs.size(0), 0);
  // The last stage's data set: the same targets, no inputs, the text mapped once.
  auto targets = MakeDataset("kjv", m, 1, cache, {}, DataParts{false, true});
  Batch t = targets->GlobalBatch(7, 8);
  EXPECT_FALSE(t.inputs.defined());
  EXPECT_TRUE(torch::equal(t.targets, b.targets));
  EXPECT_EQ(targets->HeldBytes(), ds->HeldBytes());
  EXPECT_EQ(ds->HeldBytes(),
            static_cast<int64_t>(std::filesystem::file_size(cache / "kjv" / "kjv.txt")));
  EXPECT_THROW(MakeDataset("kjv", BuildModel("mlp", {}, 1), 1, cache), InputError);
  EXPECT_THROW(MakeDataset("kjv", BuildModel("gpt", {{"vocab", "64"}}, 1), 1, cache), InputError);
  std::filesystem::remove_all(cache);
}

}  // namespace
}  // namespace dapple
