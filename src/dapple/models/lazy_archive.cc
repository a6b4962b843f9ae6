// LazyArchive: see lazy_archive.h (Note [Loading only what a stage reads]).
#include "dapple/models/lazy_archive.h"

#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <torch/csrc/jit/serialization/import.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "dapple/common/error.h"

namespace dapple {
namespace {

// An open file, closed on scope exit.
struct File {
  explicit File(const std::string& path) : fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd < 0) throw Error(path + ": " + std::strerror(errno));
  }
  ~File() { ::close(fd); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  // Reads exactly n bytes at pos into buf.
  void ReadAt(uint64_t pos, void* buf, size_t n, const std::string& path) const {
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
      ssize_t got = ::pread(fd, p, n, static_cast<off_t>(pos));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) throw Error(path + ": short read: " + std::strerror(errno));
      p += got;
      pos += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
  }
  int fd;
};

// Serves the archive to the loader; a read of a data record's bytes is recorded, not done.
class SkippingReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  SkippingReader(std::string path, std::set<uint64_t> records)
      : path_(std::move(path)), file_(path_), records_(std::move(records)) {
    struct stat st;
    if (::fstat(file_.fd, &st) != 0) throw Error(path_ + ": " + std::strerror(errno));
    size_ = static_cast<size_t>(st.st_size);
  }
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (records_.count(pos)) {
      skipped_[buf] = {pos, n};
      return n;
    }
    file_.ReadAt(pos, buf, n, path_);
    return n;
  }
  // Buffer -> (file offset, bytes) of every record read so far.
  std::map<const void*, std::pair<uint64_t, size_t>>& skipped() const { return skipped_; }

 private:
  std::string path_;
  File file_;
  std::set<uint64_t> records_;
  size_t size_ = 0;
  mutable std::map<const void*, std::pair<uint64_t, size_t>> skipped_;
};

// The file offsets of the archive's data records (each one storage).
std::set<uint64_t> DataRecordOffsets(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  std::set<uint64_t> offsets;
  for (const std::string& name : reader.getAllRecords())
    if (name.rfind("data/", 0) == 0) offsets.insert(reader.getRecordOffset(name));
  return offsets;
}

// A storage of `bytes` zeros in private anonymous pages: until written they all map the
// kernel's zero page, and so are not resident. Unmapped when the storage is freed.
c10::Storage ZeroPages(size_t bytes, const std::string& path) {
  struct Mapping {
    void* start;
    size_t bytes;
  };
  bytes = std::max<size_t>(bytes, 1);
  void* start = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (start == MAP_FAILED) throw Error(path + ": mmap: " + std::strerror(errno));
  auto unmap = [](void* context) {
    auto* m = static_cast<Mapping*>(context);
    ::munmap(m->start, m->bytes);
    delete m;
  };
  c10::DataPtr data(start, new Mapping{start, bytes}, unmap, c10::Device(c10::kCPU));
  return c10::Storage(c10::Storage::use_byte_size_t(), bytes, std::move(data),
                      /*allocator=*/nullptr, /*resizable=*/false);
}

}  // namespace

LazyArchive::LazyArchive(std::string path) : path_(std::move(path)) {
  auto reader = std::make_shared<SkippingReader>(path_, DataRecordOffsets(path_));
  module_ = torch::jit::load(std::shared_ptr<caffe2::serialize::ReadAdapterInterface>(reader));
  const auto& skipped = reader->skipped();
  auto note = [&](const torch::Tensor& t) {
    if (!t.defined() || !t.has_storage()) return;
    auto it = skipped.find(t.storage().data());
    if (it == skipped.end()) return;
    Tensor& info = tensors_[t.unsafeGetTensorImpl()];
    info.range = {it->second.first, it->second.second};
    info.storage_offset = t.storage_offset();
    info.sizes = t.sizes().vec();
    info.strides = t.strides().vec();
    info.file_dtype = t.scalar_type();
  };
  for (const auto& p : module_.named_parameters(/*recurse=*/true)) note(p.value);
  for (const auto& b : module_.named_buffers(/*recurse=*/true)) note(b.value);
  for (const auto& a : module_.named_attributes(/*recurse=*/true))
    if (a.value.isTensor()) note(a.value.toTensor());
}

void LazyArchive::Materialize(torch::Tensor t, torch::Dtype dtype) {
  torch::NoGradGuard no_grad;
  auto it = tensors_.find(t.unsafeGetTensorImpl());
  if (it != tensors_.end() && it->second.state != Tensor::kMaterialized) {
    Tensor& info = it->second;
    File file(path_);
    if (info.state == Tensor::kPending) {
      file.ReadAt(info.range.offset, t.storage().mutable_data(), info.range.bytes, path_);
    } else {
      c10::Storage storage(c10::Storage::use_byte_size_t(), info.range.bytes,
                           c10::GetCPUAllocator(), /*resizable=*/false);
      file.ReadAt(info.range.offset, storage.mutable_data(), info.range.bytes, path_);
      t.set_data(torch::empty({0}, t.options().dtype(info.file_dtype))
                     .set_(storage, info.storage_offset, info.sizes, info.strides));
    }
    info.state = Tensor::kMaterialized;
  }
  if (t.is_floating_point() && t.scalar_type() != dtype) t.set_data(t.to(dtype));
}

void LazyArchive::Release(torch::Tensor t) {
  torch::NoGradGuard no_grad;
  auto it = tensors_.find(t.unsafeGetTensorImpl());
  if (it == tensors_.end()) return;
  t.set_data(torch::empty({0}, t.options()));
  it->second.state = Tensor::kReleased;
}

void LazyArchive::StandIn(torch::Tensor t, torch::Dtype dtype) {
  torch::NoGradGuard no_grad;
  auto it = tensors_.find(t.unsafeGetTensorImpl());
  if (it == tensors_.end() || it->second.state == Tensor::kMaterialized) return;
  const Tensor& info = it->second;
  const c10::ScalarType type = c10::isFloatingType(info.file_dtype) ? dtype : info.file_dtype;
  const size_t elements = info.range.bytes / c10::elementSize(info.file_dtype);
  t.set_data(torch::empty({0}, t.options().dtype(type))
                 .set_(ZeroPages(elements * c10::elementSize(type), path_), info.storage_offset,
                       info.sizes, info.strides));
  it->second.state = Tensor::kReleased;
}

}  // namespace dapple
