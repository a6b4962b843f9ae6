// A layer's checkpoint file is written record by record (WriteLayerSnapshot) with exactly
// torch::jit::pickle_save's bytes, and a shared snapshot (SnapshotValues::kShared) holds the
// module's own storage where a copied one holds clones.
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "dapple/common/json_util.h"
#include "dapple/runtime/checkpoint/checkpoint.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;

fs::path CkptFileDir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("dapple_ckpt_file_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  return d;
}

std::vector<char> WrittenBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// A layer with parameters, Adam state and buffers, after one step.
struct AdamStepLayer {
  torch::nn::Sequential module{torch::nn::Linear(64, 32), torch::nn::BatchNorm1d(32)};
  torch::optim::Adam adam{module->parameters(), torch::optim::AdamOptions(0.01)};
  AdamStepLayer() {
    torch::manual_seed(4);
    module->train();
    module->forward(torch::randn({8, 64})).sum().backward();
    adam.step();
  }
};

TEST(CheckpointFile, WrittenRecordByRecordWithPickleSavesBytes) {
  AdamStepLayer layer;
  LayerSnapshot snapshot = SnapshotLayer("l", *layer.module, &layer.adam, OptimizerKind::kAdam);
  fs::path dir = CkptFileDir("bytes");
  const int64_t size = WriteLayerSnapshot(dir, 1, snapshot);
  std::vector<char> written = WrittenBytes(LayerFile(CheckpointStepDir(dir, 1), "l"));
  std::vector<char> want = torch::jit::pickle_save(c10::IValue(snapshot.tensors));
  EXPECT_EQ(size, static_cast<int64_t>(written.size()));
  ASSERT_EQ(written.size(), want.size());
  EXPECT_TRUE(written == want);
  // And it reads back as the state it holds.
  LayerState st = ReadLayer(CheckpointStepDir(dir, 1), "l");
  EXPECT_TRUE(torch::equal(st.params.at("0.weight"), layer.module[0]->parameters()[0]));
  EXPECT_EQ(st.optimizer.at("0.weight").count("exp_avg"), 1u);
  fs::remove_all(dir);
}

TEST(CheckpointFile, ASharedSnapshotHoldsTheModulesStorageACopiedOneClones) {
  AdamStepLayer layer;
  const torch::Tensor weight = layer.module[0]->parameters()[0];
  LayerSnapshot shared =
      SnapshotLayer("l", *layer.module, &layer.adam, OptimizerKind::kAdam, SnapshotValues::kShared);
  LayerSnapshot copied =
      SnapshotLayer("l", *layer.module, &layer.adam, OptimizerKind::kAdam, SnapshotValues::kCopied);
  EXPECT_EQ(shared.tensors.at("param/0.weight").data_ptr(), weight.data_ptr());
  EXPECT_NE(copied.tensors.at("param/0.weight").data_ptr(), weight.data_ptr());
  ASSERT_EQ(shared.tensors.size(), copied.tensors.size());
  for (const auto& entry : shared.tensors)
    EXPECT_TRUE(torch::equal(entry.value(), copied.tensors.at(entry.key()))) << entry.key();
}

TEST(CheckpointFile, AFailingProducerLeavesTheOldFileAndNoTemporary) {
  fs::path dir = CkptFileDir("atomic");
  fs::create_directories(dir);
  const fs::path file = dir / "f";
  WriteFileAtomic(file, "old");
  EXPECT_THROW(WriteFileAtomic(file,
                               [](const ByteSink& sink) {
                                 sink("new", 3);
                                 throw std::runtime_error("producer failed");
                               }),
               std::runtime_error);
  std::vector<char> kept = WrittenBytes(file);
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "old");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);  // no temporary left
  WriteFileAtomic(file, [](const ByteSink& sink) {
    sink("ne", 2);
    sink("w", 1);
  });
  kept = WrittenBytes(file);
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "new");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dapple
