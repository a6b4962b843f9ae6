// MakeDataset, SliceBatch, seeding and the in-memory shuffled-epoch batching.
#include "dapple/models/data.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <cstdlib>
#include <set>
#include <utility>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"
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

InMemoryDataset::InMemoryDataset(Batch train, Batch test, uint64_t seed, bool shuffle,
                                 RowFormat format)
    : train_(std::move(train)),
      test_(std::move(test)),
      seed_(seed),
      shuffle_(shuffle),
      format_(std::move(format)) {
  DAPPLE_CHECK(train_.rows() > 0);
  DAPPLE_CHECK(!train_.inputs.defined() || !train_.targets.defined() ||
               train_.inputs.size(0) == train_.targets.size(0));
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
  return Formatted(train_, parts.size() == 1 ? parts[0] : torch::cat(parts));
}

Batch InMemoryDataset::TestSet() {
  if (load_test_) test_ = std::exchange(load_test_, nullptr)();
  return Formatted(test_, torch::Tensor());
}

Batch InMemoryDataset::Formatted(const Batch& b, const torch::Tensor& index) const {
  auto part = [&](const torch::Tensor& rows,
                  const std::function<torch::Tensor(const torch::Tensor&)>& format) {
    if (!rows.defined()) return torch::Tensor();
    torch::Tensor picked = index.defined() ? rows.index_select(0, index) : rows;
    return format ? format(picked) : picked;
  };
  Batch out{part(b.inputs, format_.inputs), part(b.targets, format_.targets)};
  for (const auto& f : format_.files) f->ReleasePages();
  return out;
}

int64_t InMemoryDataset::HeldBytes() const {
  std::set<const void*> seen;  // views of one storage (kjv's windows) count once
  int64_t bytes = 0;
  for (const torch::Tensor* t : {&train_.inputs, &train_.targets, &test_.inputs, &test_.targets}) {
    if (t->defined() && seen.insert(t->storage().data()).second)
      bytes += static_cast<int64_t>(t->storage().nbytes());
  }
  return bytes;
}

std::shared_ptr<FileBytes> CachedFileBytes(const std::filesystem::path& cache_dir,
                                           const std::string& name,
                                           const std::function<std::string()>& make) {
  const std::filesystem::path cached = cache_dir / name;
  if (std::filesystem::is_regular_file(cached)) return FileBytes::Map(cached);
  std::string bytes = make();
  std::error_code ec;
  std::filesystem::create_directories(cached.parent_path(), ec);
  if (!ec) {
    try {
      WriteFileAtomic(cached, bytes);
      return FileBytes::Map(cached);
    } catch (const std::exception&) {  // a read-only cache is not fatal
    }
  }
  return FileBytes::Hold(std::move(bytes));
}

}  // namespace internal

bool IsDataFilePath(const std::string& name) {
  return name.find('/') != std::string::npos || name.find('.') != std::string::npos;
}

std::unique_ptr<Dataset> MakeDataset(const std::string& name, const Model& model, uint64_t seed,
                                     const std::filesystem::path& cache_dir,
                                     const DataFileOptions& files, DataParts parts) {
  if (IsDataFilePath(name)) return internal::MakeFileDataset(name, model, seed, files, parts);
  if (name == "synthetic") return internal::MakeSyntheticDataset(model, seed);
  if (name == "fashion-mnist") return internal::MakeFashionMnist(model, seed, cache_dir, parts);
  if (name == "kjv") return internal::MakeKjv(model, seed, cache_dir, parts);
  ThrowInput(
      "unknown data set '{}' (known: fashion-mnist, kjv, synthetic, or a file: PATH.pt, "
      "PATH.bin)",
      name);
}

Batch SliceBatch(const Batch& b, int64_t begin, int64_t end) {
  DAPPLE_CHECK(0 <= begin && begin <= end && end <= b.rows());
  auto rows = [&](const torch::Tensor& t) { return t.defined() ? t.slice(0, begin, end) : t; };
  return {rows(b.inputs), rows(b.targets)};
}

std::filesystem::path DefaultDataCacheDir() { return DappleCacheDir(); }

}  // namespace dapple
