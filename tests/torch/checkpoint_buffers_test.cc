// Note [Buffers in checkpoints]: a layer's buffers round-trip through SaveLayer/LoadLayer,
// and a layer file written before checkpoints held buffers still loads its parameters.
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <filesystem>
#include <fstream>

#include "dapple/common/error.h"
#include "dapple/runtime/checkpoint/checkpoint.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;

torch::nn::Sequential Layer() {
  return torch::nn::Sequential(torch::nn::Linear(3, 4), torch::nn::BatchNorm1d(4));
}

fs::path Dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() /
               ("dapple_ckpt_buffers_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  return d;
}

TEST(CheckpointBuffers, RunningStatisticsRoundTrip) {
  torch::manual_seed(1);
  auto trained = Layer();
  trained->train();
  for (int i = 0; i < 3; ++i) trained->forward(torch::randn({8, 3}));  // moves the stats
  fs::path dir = Dir("roundtrip");
  SaveLayer(dir, 1, "l", *trained, nullptr, OptimizerKind::kSgd);

  auto fresh = Layer();
  LoadLayer(CheckpointStepDir(dir, 1), "l", *fresh, /*states=*/nullptr);
  auto want = trained->named_buffers(true), got = fresh->named_buffers(true);
  ASSERT_EQ(want.size(), 3u);  // running_mean, running_var, num_batches_tracked
  for (const auto& item : want) {
    EXPECT_TRUE(torch::equal(got[item.key()], item.value())) << item.key();
  }
  EXPECT_EQ(got["1.num_batches_tracked"].item<int64_t>(), 3);
  fs::remove_all(dir);
}

TEST(CheckpointBuffers, AFileWithoutBuffersStillLoadsItsParameters) {
  torch::manual_seed(2);
  auto old = Layer();
  // The layout of a layer file before buffers were saved: parameters only.
  c10::Dict<std::string, torch::Tensor> dict;
  for (const auto& item : old->named_parameters(true))
    dict.insert("param/" + item.key(), item.value().detach().clone());
  std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(dict));
  fs::path dir = Dir("old");
  fs::create_directories(CheckpointStepDir(dir, 1));
  std::ofstream(CheckpointStepDir(dir, 1) / "l.pt", std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));

  torch::manual_seed(3);
  auto fresh = Layer();
  auto stats_before = fresh->named_buffers(true)["1.running_var"].clone();
  LayerState st = ReadLayer(CheckpointStepDir(dir, 1), "l");
  EXPECT_FALSE(st.has_buffers);
  EXPECT_NO_THROW(LoadLayer(CheckpointStepDir(dir, 1), "l", *fresh, /*states=*/nullptr));
  for (const auto& item : old->named_parameters(true))
    EXPECT_TRUE(torch::equal(fresh->named_parameters(true)[item.key()], item.value()));
  EXPECT_TRUE(torch::equal(fresh->named_buffers(true)["1.running_var"], stats_before));

  // A file that has buffers, but not the model's: one line naming the file and the count.
  SaveLayer(dir, 2, "l", *torch::nn::Sequential(torch::nn::Linear(3, 4)), nullptr,
            OptimizerKind::kSgd);
  LayerState no_bn = ReadLayer(CheckpointStepDir(dir, 2), "l");
  no_bn.has_buffers = true;  // as if it had an empty buffer list on purpose
  try {
    LoadBuffers(no_bn, "f.pt", "l", *fresh);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("f.pt: 0 buffers but layer l has 3"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dapple
