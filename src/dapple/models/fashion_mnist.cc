// Fashion-MNIST from the Debian package dataset-fashion-mnist: gzip-compressed IDX files,
// decompressed once into the cache folder, then mapped (Note [Data pages off the resident
// set] in file_bytes.h); each batch's bytes become floats when it is gathered. Pixels are
// scaled to [0, 1] and standardised with the training set's mean and deviation (0.2860,
// 0.3530).
#include <fmt/ranges.h>
#include <zlib.h>

#include "dapple/common/error.h"
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

// The decompressed IDX file `name`, mapped from the cache (decompressed into it first).
std::shared_ptr<FileBytes> IdxBytes(const std::filesystem::path& source,
                                    const std::filesystem::path& cache, const std::string& name) {
  return CachedFileBytes(cache / "fashion-mnist", name, [&] {
    std::filesystem::path gz = source / (name + ".gz");
    if (!std::filesystem::exists(gz))
      ThrowInput("{}: missing; install the Debian package {}", gz.string(), kPackage);
    return Gunzip(gz);
  });
}

uint32_t BigEndian(const uint8_t* b) {
  return static_cast<uint32_t>(b[0]) << 24 | static_cast<uint32_t>(b[1]) << 16 |
         static_cast<uint32_t>(b[2]) << 8 | b[3];
}

// An IDX file of unsigned bytes with `dims` dimensions, as a uint8 tensor viewing the file.
torch::Tensor ReadIdx(FileBytes& bytes, int dims, const std::string& name) {
  const int64_t header = 4 + 4 * dims;
  if (bytes.size() < header || BigEndian(bytes.data()) != 0x800u + dims)
    ThrowInput("{}: not an IDX file of {} dimensions of bytes", name, dims);
  std::vector<int64_t> shape;
  int64_t total = 1;
  for (int d = 0; d < dims; ++d) {
    shape.push_back(BigEndian(bytes.data() + 4 + 4 * d));
    total *= shape.back();
  }
  if (bytes.size() != header + total) ThrowInput("{}: size does not match its header", name);
  return bytes.View(header, shape);
}

// The images and labels of split `prefix` for the parts asked for (uint8 views of the
// mapped files; RowFormat turns them into the model's tensors). Both files' headers are
// checked, so that a process reading one part fails as one reading both would.
Batch LoadSplit(const std::filesystem::path& source, const std::filesystem::path& cache,
                const std::string& prefix, DataParts parts, RowFormat& format) {
  std::shared_ptr<FileBytes> image_file = IdxBytes(source, cache, prefix + "-images-idx3-ubyte");
  std::shared_ptr<FileBytes> label_file = IdxBytes(source, cache, prefix + "-labels-idx1-ubyte");
  torch::Tensor images = ReadIdx(*image_file, 3, prefix + "-images");
  torch::Tensor labels = ReadIdx(*label_file, 1, prefix + "-labels");
  if (images.size(0) != labels.size(0)) ThrowInput("fashion-mnist {}: image/label count", prefix);
  Batch b;
  if (parts.inputs) {
    b.inputs = images;
    format.files.push_back(image_file);
  }
  if (parts.targets) {
    b.targets = labels;
    format.files.push_back(label_file);
  }
  image_file->ReleasePages();
  label_file->ReleasePages();
  return b;
}

}  // namespace

std::unique_ptr<Dataset> MakeFashionMnistFrom(const Model& model, uint64_t seed,
                                              const std::filesystem::path& cache_dir,
                                              const std::filesystem::path& source_dir,
                                              DataParts parts) {
  int64_t numel = 1;
  for (int64_t d : model.input_shape) numel *= d;
  if (model.input_dtype == torch::kInt64 || numel != 28 * 28)
    ThrowInput("fashion-mnist needs a model taking 28x28 = 784 float inputs; model {} takes {}",
               model.name, fmt::join(model.input_shape, "x"));
  if (!model.target_shape.empty() || model.num_classes < 10)
    ThrowInput("fashion-mnist needs a classifier with at least 10 classes; model {} has {}",
               model.name, model.num_classes);
  RowFormat format;
  Batch train = LoadSplit(source_dir, cache_dir, "train", parts, format);
  Batch test = LoadSplit(source_dir, cache_dir, "t10k", parts, format);
  std::vector<int64_t> shape{-1};
  shape.insert(shape.end(), model.input_shape.begin(), model.input_shape.end());
  const torch::Dtype dtype = model.input_dtype;
  format.inputs = [shape, dtype](const torch::Tensor& pixels) {
    return pixels.to(dtype).div_(255.0).sub_(kMean).div_(kStd).reshape(shape);
  };
  format.targets = [](const torch::Tensor& labels) { return labels.to(torch::kLong); };
  return std::make_unique<InMemoryDataset>(std::move(train), std::move(test), seed,
                                           /*shuffle=*/true, std::move(format));
}

std::unique_ptr<Dataset> MakeFashionMnist(const Model& model, uint64_t seed,
                                          const std::filesystem::path& cache_dir, DataParts parts) {
  return MakeFashionMnistFrom(model, seed, cache_dir, "/usr/share/datasets/fashion-mnist", parts);
}

}  // namespace dapple::internal
