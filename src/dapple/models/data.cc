// MakeDataset, SliceBatch, seeding and the in-memory shuffled-epoch batching.
#include "dapple/models/data.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <cstdlib>

#include "dapple/common/error.h"
#include "dapple/common/machine.h"
#include "dapple/models/data_internal.h"

namespace dapple {
namespace internal {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

at::Generator SeededGenerator(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t s = SplitMix64(SplitMix64(SplitMix64(seed) ^ stream) ^ index);
  return at::detail::createCPUGenerator(s);
}

InMemoryDataset::InMemoryDataset(Batch train, Batch test, uint64_t seed, bool shuffle)
    : train_(std::move(train)), test_(std::move(test)), seed_(seed), shuffle_(shuffle) {
  DAPPLE_CHECK(train_.inputs.size(0) > 0 && train_.inputs.size(0) == train_.targets.size(0));
}

const torch::Tensor& InMemoryDataset::Permutation(int64_t epoch) {
  if (epoch != cached_epoch_) {
    if (shuffle_) {
      at::Generator gen = SeededGenerator(seed_, /*stream=*/1, epoch);
      cached_perm_ = torch::randperm(size(), gen, torch::kLong);
    } else {
      cached_perm_ = torch::arange(size(), torch::kLong);
    }
    cached_epoch_ = epoch;
  }
  return cached_perm_;
}

Batch InMemoryDataset::GlobalBatch(int64_t step, int64_t global_batch) {
  DAPPLE_CHECK(step >= 0 && global_batch > 0);
  int64_t n = size();
  std::vector<torch::Tensor> parts;
  int64_t pos = step * global_batch, end = pos + global_batch;
  while (pos < end) {
    int64_t epoch = pos / n, offset = pos % n;
    int64_t take = std::min(end - pos, n - offset);
    parts.push_back(Permutation(epoch).slice(0, offset, offset + take));
    pos += take;
  }
  torch::Tensor index = parts.size() == 1 ? parts[0] : torch::cat(parts);
  return {train_.inputs.index_select(0, index), train_.targets.index_select(0, index)};
}

}  // namespace internal

bool IsDataFilePath(const std::string& name) {
  return name.find('/') != std::string::npos || name.find('.') != std::string::npos;
}

std::unique_ptr<Dataset> MakeDataset(const std::string& name, const Model& model, uint64_t seed,
                                     const std::filesystem::path& cache_dir,
                                     const DataFileOptions& files) {
  if (IsDataFilePath(name)) return internal::MakeFileDataset(name, model, seed, files);
  if (name == "synthetic") return internal::MakeSyntheticDataset(model, seed);
  if (name == "fashion-mnist") return internal::MakeFashionMnist(model, seed, cache_dir);
  if (name == "kjv") return internal::MakeKjv(model, seed, cache_dir);
  ThrowInput(
      "unknown data set '{}' (known: fashion-mnist, kjv, synthetic, or a file: PATH.pt, "
      "PATH.bin)",
      name);
}

Batch SliceBatch(const Batch& b, int64_t begin, int64_t end) {
  DAPPLE_CHECK(0 <= begin && begin <= end && end <= b.inputs.size(0));
  return {b.inputs.slice(0, begin, end), b.targets.slice(0, begin, end)};
}

std::filesystem::path DefaultDataCacheDir() { return DappleCacheDir(); }

}  // namespace dapple
