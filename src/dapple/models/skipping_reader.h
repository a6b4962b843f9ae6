// Reading a PyTorch zip archive (a TorchScript module, a torch.save file) without reading its
// tensors' values (Note [Loading only what a stage reads] in lazy_archive.h).
#pragma once

#include <caffe2/serialize/read_adapter_interface.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

namespace dapple {

// An open file, closed on scope exit. Throws Error naming the path when it cannot be opened.
struct ArchiveFile {
  explicit ArchiveFile(const std::string& path);
  ~ArchiveFile();
  ArchiveFile(const ArchiveFile&) = delete;
  ArchiveFile& operator=(const ArchiveFile&) = delete;
  // Reads exactly n bytes at pos into buf; throws Error naming `path` on a short read.
  void ReadAt(uint64_t pos, void* buf, size_t n, const std::string& path) const;
  int fd;
};

// The file offsets of the archive's data records (each one storage).
std::set<uint64_t> DataRecordOffsets(const std::string& path);

// Serves an archive to libtorch's zip reader; a read of one of `records` (file offsets) is
// recorded, not done, so the buffer it was to fill stays untouched: not resident, and free
// to release unread. libtorch's zip reader does not check a record's CRC.
class SkippingReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  SkippingReader(std::string path, std::set<uint64_t> records);
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char* what) const override;
  // Reads the record skipped into `buffer` after all (the values of one tensor of a read
  // otherwise without values). False when no record was skipped into `buffer`.
  bool ReadSkipped(const void* buffer) const;
  // Buffer -> (file offset, bytes) of every record skipped so far.
  const std::map<const void*, std::pair<uint64_t, size_t>>& skipped() const { return skipped_; }

 private:
  std::string path_;
  ArchiveFile file_;
  std::set<uint64_t> records_;
  size_t size_ = 0;
  mutable std::map<const void*, std::pair<uint64_t, size_t>> skipped_;
};

}  // namespace dapple
