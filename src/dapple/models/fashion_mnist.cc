// Fashion-MNIST from the Debian package dataset-fashion-mnist: gzip-compressed IDX files,
// decompressed once into the cache folder, then read into memory. Pixels are scaled to
// [0, 1] and standardised with the training set's mean and deviation (0.2860, 0.3530).
#include <fmt/ranges.h>
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"
#include "dapple/models/data_internal.h"

namespace dapple::internal {
namespace {

constexpr char kPackage[] = "dataset-fashion-mnist";
constexpr double kMean = 0.2860, kStd = 0.3530;

std::string Gunzip(const std::filesystem::path& gz) {
  gzFile f = gzopen(gz.c_str(), "rb");
  if (!f) ThrowInput("{}: cannot open (install the Debian package {})", gz.string(), kPackage);
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, n);
  bool failed = n < 0;
  gzclose(f);
  if (failed) ThrowInput("{}: corrupt gzip data", gz.string());
  return out;
}

// The decompressed IDX file `name`, from the cache or decompressed into it.
std::string IdxBytes(const std::filesystem::path& source, const std::filesystem::path& cache,
                     const std::string& name) {
  std::filesystem::path cached = cache / "fashion-mnist" / name;
  if (std::ifstream in(cached, std::ios::binary); in) {
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::filesystem::path gz = source / (name + ".gz");
  if (!std::filesystem::exists(gz))
    ThrowInput("{}: missing; install the Debian package {}", gz.string(), kPackage);
  std::string bytes = Gunzip(gz);
  std::error_code ec;
  std::filesystem::create_directories(cached.parent_path(), ec);
  if (!ec) WriteFileAtomic(cached, bytes);  // a read-only cache is not fatal
  return bytes;
}

uint32_t BigEndian(const std::string& b, size_t at) {
  auto u = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(b[at + i])); };
  return u(0) << 24 | u(1) << 16 | u(2) << 8 | u(3);
}

// An IDX file of unsigned bytes with `dims` dimensions, as a uint8 tensor.
torch::Tensor ReadIdx(const std::string& bytes, int dims, const std::string& name) {
  size_t header = 4 + 4 * dims;
  if (bytes.size() < header || BigEndian(bytes, 0) != 0x800u + dims)
    ThrowInput("{}: not an IDX file of {} dimensions of bytes", name, dims);
  std::vector<int64_t> shape;
  int64_t total = 1;
  for (int d = 0; d < dims; ++d) {
    shape.push_back(BigEndian(bytes, 4 + 4 * d));
    total *= shape.back();
  }
  if (bytes.size() != header + total) ThrowInput("{}: size does not match its header", name);
  torch::Tensor t = torch::empty(shape, torch::kUInt8);
  std::memcpy(t.data_ptr(), bytes.data() + header, total);
  return t;
}

Batch LoadSplit(const Model& model, const std::filesystem::path& source,
                const std::filesystem::path& cache, const std::string& prefix) {
  torch::Tensor images =
      ReadIdx(IdxBytes(source, cache, prefix + "-images-idx3-ubyte"), 3, prefix + "-images");
  torch::Tensor labels =
      ReadIdx(IdxBytes(source, cache, prefix + "-labels-idx1-ubyte"), 1, prefix + "-labels");
  if (images.size(0) != labels.size(0)) ThrowInput("fashion-mnist {}: image/label count", prefix);
  std::vector<int64_t> shape{images.size(0)};
  shape.insert(shape.end(), model.input_shape.begin(), model.input_shape.end());
  torch::Tensor x = images.to(model.input_dtype).div_(255.0).sub_(kMean).div_(kStd);
  return {x.reshape(shape), labels.to(torch::kLong)};
}

}  // namespace

std::unique_ptr<Dataset> MakeFashionMnistFrom(const Model& model, uint64_t seed,
                                              const std::filesystem::path& cache_dir,
                                              const std::filesystem::path& source_dir) {
  int64_t numel = 1;
  for (int64_t d : model.input_shape) numel *= d;
  if (model.input_dtype == torch::kInt64 || numel != 28 * 28)
    ThrowInput("fashion-mnist needs a model taking 28x28 = 784 float inputs; model {} takes {}",
               model.name, fmt::join(model.input_shape, "x"));
  if (!model.target_shape.empty() || model.num_classes < 10)
    ThrowInput("fashion-mnist needs a classifier with at least 10 classes; model {} has {}",
               model.name, model.num_classes);
  Batch train = LoadSplit(model, source_dir, cache_dir, "train");
  Batch test = LoadSplit(model, source_dir, cache_dir, "t10k");
  return std::make_unique<InMemoryDataset>(std::move(train), std::move(test), seed);
}

std::unique_ptr<Dataset> MakeFashionMnist(const Model& model, uint64_t seed,
                                          const std::filesystem::path& cache_dir) {
  return MakeFashionMnistFrom(model, seed, cache_dir, "/usr/share/datasets/fashion-mnist");
}

}  // namespace dapple::internal
