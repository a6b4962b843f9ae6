// LazyArchive: see lazy_archive.h (Note [Loading only what a stage reads]).
#include "dapple/models/lazy_archive.h"

#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "dapple/common/error.h"
#include "dapple/models/skipping_reader.h"

namespace dapple {
namespace {

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
    ArchiveFile file(path_);
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
