// Internal to the data sets: seeding, and the shuffled-epoch batching shared by the data
// sets held in memory (Fashion-MNIST, kjv).
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "dapple/models/data.h"

namespace dapple::internal {

// A CPU generator seeded from (seed, stream, index): independent streams per use.
at::Generator SeededGenerator(uint64_t seed, uint64_t stream, uint64_t index);

// A data set held in memory as [N, ...] tensors. Epoch e visits the training samples in
// the order randperm(N) seeded by (seed, e); global batch `step` holds positions
// [step * gbs, (step + 1) * gbs) of the concatenated epochs.
class InMemoryDataset : public Dataset {
 public:
  // `shuffle` false: epoch e visits the samples in file order (--no-shuffle).
  InMemoryDataset(Batch train, Batch test, uint64_t seed, bool shuffle = true);
  int64_t size() const override { return train_.inputs.size(0); }
  Batch GlobalBatch(int64_t step, int64_t global_batch) override;
  Batch TestSet() override { return test_; }

 private:
  const torch::Tensor& Permutation(int64_t epoch);
  Batch train_, test_;
  uint64_t seed_;
  bool shuffle_;
  int64_t cached_epoch_ = -1;
  torch::Tensor cached_perm_;
};

std::unique_ptr<Dataset> MakeSyntheticDataset(const Model& model, uint64_t seed);
std::unique_ptr<Dataset> MakeFashionMnist(const Model& model, uint64_t seed,
                                          const std::filesystem::path& cache_dir);
// As MakeFashionMnist, reading the .gz files from `source_dir` (tests point it elsewhere).
std::unique_ptr<Dataset> MakeFashionMnistFrom(const Model& model, uint64_t seed,
                                              const std::filesystem::path& cache_dir,
                                              const std::filesystem::path& source_dir);
// Data files of the user (file_data.cc): a torch.save dict of `input` and `target`
// tensors, or a flat uint16 token file.
std::unique_ptr<Dataset> MakeFileDataset(const std::filesystem::path& path, const Model& model,
                                         uint64_t seed, const DataFileOptions& options);
std::unique_ptr<Dataset> MakeKjv(const Model& model, uint64_t seed,
                                 const std::filesystem::path& cache_dir);

}  // namespace dapple::internal
