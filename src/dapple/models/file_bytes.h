// The bytes of a data file, memory-mapped read-only, as tensors that view them.
//
// Note [Data pages off the resident set]: a process maps the data files it reads rather than
// copying them into its heap, so that it holds only what its stage needs (Note [Data a stage
// reads] in data.h). Pages of a mapping that the process touched still count in its resident
// set (VmRSS, and so in its peak VmHWM) until it unmaps them, though they stay in the kernel's
// page cache, shared with every other process that reads the file. A data set gathers each
// batch from the mapping into tensors of its own, then hands the touched pages back
// (ReleasePages): over an epoch the resident set holds one batch of the data, not the file,
// and the next batch's pages are found in the page cache without a disk read.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace dapple::internal {

class FileBytes : public std::enable_shared_from_this<FileBytes> {
 public:
  // Maps `path`; throws InputError naming the file when it cannot be opened or mapped.
  static std::shared_ptr<FileBytes> Map(const std::filesystem::path& path);
  // Holds `bytes` in memory (a file that could not be cached to disk); ReleasePages does
  // nothing.
  static std::shared_ptr<FileBytes> Hold(std::string bytes);
  ~FileBytes();
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;

  const uint8_t* data() const { return data_; }
  int64_t size() const { return size_; }
  // A uint8 tensor of `shape` viewing the bytes from `offset` on (read-only: nothing may
  // write to it); it keeps these bytes alive. REQUIRES: the bytes lie inside the file.
  torch::Tensor View(int64_t offset, const std::vector<int64_t>& shape);
  // Drops the mapping's pages from this process's resident set (Note [Data pages off the
  // resident set]); the data stays readable.
  void ReleasePages() const;

 private:
  FileBytes() = default;
  const uint8_t* data_ = nullptr;
  int64_t size_ = 0;
  bool mapped_ = false;
  std::string held_;
};

}  // namespace dapple::internal
