// FileBytes: see file_bytes.h.
#include "dapple/models/file_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dapple/common/error.h"

namespace dapple::internal {

std::shared_ptr<FileBytes> FileBytes::Map(const std::filesystem::path& path) {
  const std::string file = path.string();
  int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) ThrowInput("{}: cannot open the data file", file);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    ThrowInput("{}: cannot read the data file's size", file);
  }
  std::shared_ptr<FileBytes> f(new FileBytes());
  f->size_ = st.st_size;
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      ThrowInput("{}: cannot map the data file", file);
    }
    f->data_ = static_cast<const uint8_t*>(p);
    f->mapped_ = true;
  }
  ::close(fd);
  return f;
}

std::shared_ptr<FileBytes> FileBytes::Hold(std::string bytes) {
  std::shared_ptr<FileBytes> f(new FileBytes());
  f->held_ = std::move(bytes);
  f->data_ = reinterpret_cast<const uint8_t*>(f->held_.data());
  f->size_ = static_cast<int64_t>(f->held_.size());
  return f;
}

FileBytes::~FileBytes() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

torch::Tensor FileBytes::View(int64_t offset, const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  DAPPLE_CHECK(offset >= 0 && offset + numel <= size_, "FileBytes::View outside the file");
  // The deleter holds the bytes alive as long as a view (or a view of it) exists.
  std::shared_ptr<FileBytes> self = shared_from_this();
  return torch::from_blob(
      const_cast<uint8_t*>(data_ + offset), shape, [self](void*) {}, torch::kUInt8);
}

void FileBytes::ReleasePages() const {
  // MADV_DONTNEED on a read-only shared file mapping unmaps the pages; the next read maps
  // them again from the page cache.
  if (mapped_) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_DONTNEED);
}

}  // namespace dapple::internal
