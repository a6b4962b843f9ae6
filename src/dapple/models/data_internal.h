// Internal to the data sets: seeding, and the shuffled-epoch batching shared by the data
// sets held in memory (Fashion-MNIST, kjv).
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dapple/models/data.h"
#include "dapple/models/file_bytes.h"

namespace dapple::internal {

// A CPU generator seeded from (seed, stream, index): independent streams per use.
at::Generator SeededGenerator(uint64_t seed, uint64_t stream, uint64_t index);

// How the rows gathered for a batch become the model's tensors (bytes of a mapped file to
// standardised floats, say): a function per part, identity when unset. `files` are the
// mappings the rows view; their pages are released after every batch (Note [Data pages off
// the resident set]).
struct RowFormat {
  std::function<torch::Tensor(const torch::Tensor&)> inputs, targets;
  std::vector<std::shared_ptr<FileBytes>> files;
};

// A data set whose samples are the rows of [N, ...] tensors, in memory or viewing mapped
// files; either part may be undefined (DataParts). Epoch e visits the training samples in
// the order randperm(N) seeded by (seed, e); global batch `step` holds positions
// [step * gbs, (step + 1) * gbs) of the concatenated epochs.
class InMemoryDataset : public Dataset {
 public:
  // `shuffle` false: epoch e visits the samples in file order (--no-shuffle).
  InMemoryDataset(Batch train, Batch test, uint64_t seed, bool shuffle = true,
                  RowFormat format = {});
  int64_t size() const override { return train_.rows(); }
  Batch GlobalBatch(int64_t step, int64_t global_batch) override;
  Batch TestSet() override;
  int64_t HeldBytes() const override;
  // Makes the held-out samples on the first TestSet instead (evaluation runs after training,
  // so training does not hold them).
  void LoadTestLater(std::function<Batch()> load) { load_test_ = std::move(load); }

 private:
  const torch::Tensor& Permutation(int64_t epoch);
  // The model's tensors of rows `index` of `b` (all rows when `index` is undefined).
  Batch Formatted(const Batch& b, const torch::Tensor& index) const;
  Batch train_, test_;
  uint64_t seed_;
  bool shuffle_;
  RowFormat format_;
  int64_t cached_epoch_ = -1;
  torch::Tensor cached_perm_;
  std::function<Batch()> load_test_;
};

std::unique_ptr<Dataset> MakeSyntheticDataset(const Model& model, uint64_t seed);
std::unique_ptr<Dataset> MakeFashionMnist(const Model& model, uint64_t seed,
                                          const std::filesystem::path& cache_dir, DataParts parts);
// As MakeFashionMnist, reading the .gz files from `source_dir` (tests point it elsewhere).
std::unique_ptr<Dataset> MakeFashionMnistFrom(const Model& model, uint64_t seed,
                                              const std::filesystem::path& cache_dir,
                                              const std::filesystem::path& source_dir,
                                              DataParts parts = {});
// Data files of the user (file_data.cc): a torch.save dict of `input` and `target`
// tensors, or a flat uint16 token file.
std::unique_ptr<Dataset> MakeFileDataset(const std::filesystem::path& path, const Model& model,
                                         uint64_t seed, const DataFileOptions& options,
                                         DataParts parts);
std::unique_ptr<Dataset> MakeKjv(const Model& model, uint64_t seed,
                                 const std::filesystem::path& cache_dir, DataParts parts);
// The bytes of `cache_dir`/`name`: the cached file mapped, else `make()`'s bytes, written
// to the cache (atomically) and mapped, or held in memory when the cache is not writable.
std::shared_ptr<FileBytes> CachedFileBytes(const std::filesystem::path& cache_dir,
                                           const std::string& name,
                                           const std::function<std::string()>& make);

}  // namespace dapple::internal
