// A user's torch.save data file is checked without reading its inputs' values (CheckDataFile:
// the launcher's check), and its held-out file is read only when evaluation asks for it.
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <filesystem>
#include <fstream>

#include "dapple/common/error.h"
#include "dapple/common/process_memory.h"
#include "dapple/models/data.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kRows = 16000, kWidth = 1024, kClasses = 10;  // inputs: 62.5 MiB

// A torch.save dict of `input` and `target` at `path`.
void WriteDataFile(const fs::path& path, const torch::Tensor& input, const torch::Tensor& target) {
  c10::Dict<std::string, torch::Tensor> dict;
  dict.insert("input", input);
  dict.insert("target", target);
  std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(dict));
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

Model VectorClassifier(int64_t classes) {
  Model m;
  m.input_shape = {kWidth};
  m.input_dtype = torch::kFloat32;
  m.target_dtype = torch::kInt64;
  m.num_classes = classes;
  return m;
}

class DataFileCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dapple_data_check_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    torch::manual_seed(5);
    WriteDataFile(dir_ / "train.pt", torch::randn({kRows, kWidth}),
                  torch::randint(0, kClasses, {kRows}));
    WriteDataFile(dir_ / "test.pt", torch::randn({40, kWidth}), torch::randint(0, kClasses, {40}));
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string File(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(DataFileCheck, ReadsNoInputValuesButChecksTheClasses) {
  const int64_t input_bytes = kRows * kWidth * 4;
  int64_t before = ResidentBytes();
  CheckDataFile(File("train.pt"), VectorClassifier(kClasses), {});
  const int64_t check_grew = ResidentBytes() - before;
  EXPECT_LT(check_grew, input_bytes / 8) << "the check read the inputs' values";
  // The targets are read: a head of fewer classes is refused, naming the file.
  try {
    CheckDataFile(File("train.pt"), VectorClassifier(4), {});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("train.pt: 'target' holds class"), std::string::npos)
        << e.what();
  }
  // The held-out file too.
  DataFileOptions with_eval;
  with_eval.eval_path = File("train.pt");
  EXPECT_THROW(CheckDataFile(File("test.pt"), VectorClassifier(4), with_eval), InputError);
  // The control: making the data set reads them (the measure above can fail).
  before = ResidentBytes();
  auto data = MakeDataset(File("train.pt"), VectorClassifier(kClasses), 1, "", {});
  EXPECT_GT(ResidentBytes() - before, input_bytes / 2);
  EXPECT_EQ(data->HeldBytes(), input_bytes + kRows * 8);
}

TEST_F(DataFileCheck, TheHeldOutSetIsReadWhenEvaluationAsks) {
  DataFileOptions o;
  o.eval_path = File("test.pt");
  auto data = MakeDataset(File("train.pt"), VectorClassifier(kClasses), 1, "", o);
  const int64_t train_bytes = kRows * kWidth * 4 + kRows * 8;
  EXPECT_EQ(data->HeldBytes(), train_bytes);  // not yet
  Batch test = data->TestSet();
  EXPECT_EQ(data->HeldBytes(), train_bytes + 40 * kWidth * 4 + 40 * 8);
  c10::IValue saved = torch::jit::pickle_load([&] {
    std::ifstream in(dir_ / "test.pt", std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  }());
  EXPECT_TRUE(torch::equal(test.inputs, saved.toGenericDict().at("input").toTensor()));
  EXPECT_TRUE(torch::equal(test.targets, saved.toGenericDict().at("target").toTensor()));
  // A bad held-out file is refused when the data set is made, not after training.
  WriteDataFile(dir_ / "bad.pt", torch::randn({3, kWidth + 1}), torch::zeros({3}, torch::kLong));
  o.eval_path = File("bad.pt");
  EXPECT_THROW(MakeDataset(File("train.pt"), VectorClassifier(kClasses), 1, "", o), InputError);
}

}  // namespace
}  // namespace dapple
