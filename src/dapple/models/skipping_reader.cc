// ArchiveFile, SkippingReader: see skipping_reader.h.
#include "dapple/models/skipping_reader.h"

#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dapple/common/error.h"

namespace dapple {

ArchiveFile::ArchiveFile(const std::string& path) : fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
  if (fd < 0) throw Error(path + ": " + std::strerror(errno));
}

ArchiveFile::~ArchiveFile() { ::close(fd); }

void ArchiveFile::ReadAt(uint64_t pos, void* buf, size_t n, const std::string& path) const {
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

std::set<uint64_t> DataRecordOffsets(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  std::set<uint64_t> offsets;
  for (const std::string& name : reader.getAllRecords())
    if (name.rfind("data/", 0) == 0) offsets.insert(reader.getRecordOffset(name));
  return offsets;
}

SkippingReader::SkippingReader(std::string path, std::set<uint64_t> records)
    : path_(std::move(path)), file_(path_), records_(std::move(records)) {
  struct stat st;
  if (::fstat(file_.fd, &st) != 0) throw Error(path_ + ": " + std::strerror(errno));
  size_ = static_cast<size_t>(st.st_size);
}

size_t SkippingReader::read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const {
  if (records_.count(pos)) {
    skipped_[buf] = {pos, n};
    return n;
  }
  file_.ReadAt(pos, buf, n, path_);
  return n;
}

bool SkippingReader::ReadSkipped(const void* buffer) const {
  auto it = skipped_.find(buffer);
  if (it == skipped_.end()) return false;
  // The buffer is the record's own, allocated by the zip reader and not yet written.
  file_.ReadAt(it->second.first, const_cast<void*>(buffer), it->second.second, path_);
  return true;
}

}  // namespace dapple
