// A TorchScript archive loaded without reading its tensors (Note [Loading only what a stage
// reads]).
//
// Note [Loading only what a stage reads]: torch::jit::load reads every tensor of the archive,
// so a process that holds one stage of a model larger than its memory could not even load
// it. The archive is a zip whose data/ records hold one storage each, stored uncompressed;
// the loader reads each record into a fresh buffer in one read. LazyArchive serves those
// reads without writing the buffer (the pages stay untouched, so they are not resident;
// the zip reader of libtorch does not check their CRC) and records which file range belongs
// to which buffer. The module comes back complete in structure, with every tensor's values
// pending; Materialize reads a tensor's values when a layer that reads it is held or run,
// Release frees them again, and the pending tensors of layers a process does not hold are
// freed without ever being read.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <map>
#include <string>

namespace dapple {

class LazyArchive {
 public:
  // Loads the module at `path` with its tensors pending. Throws what torch::jit::load throws.
  explicit LazyArchive(std::string path);

  torch::jit::Module& module() { return module_; }

  // Reads `t`'s values from the archive (when pending or released) and converts floating
  // point values to `dtype`. A tensor that did not come from the archive's data is left as
  // it is, but converted.
  void Materialize(torch::Tensor t, torch::Dtype dtype);
  // Frees `t`'s values; a later Materialize reads them again.
  void Release(torch::Tensor t);
  // Gives `t` zeros in place of its values (floating point ones in `dtype`), from pages that
  // the kernel maps to its one zero page until written, so they take no memory: a layer runs
  // on them to learn its output's shape without reading the archive (Note [Probing with
  // zeros] in script_model.cc). Release frees them. A tensor that did not come from the
  // archive's data, or whose values were read, is left as it is.
  void StandIn(torch::Tensor t, torch::Dtype dtype);

 private:
  struct Range {
    uint64_t offset = 0;  // of the record's data in the file
    size_t bytes = 0;
  };
  struct Tensor {
    Range range;
    int64_t storage_offset = 0;
    std::vector<int64_t> sizes, strides;
    c10::ScalarType file_dtype = c10::ScalarType::Float;  // as the archive holds it
    enum State { kPending, kMaterialized, kReleased } state = kPending;
  };

  std::string path_;
  torch::jit::Module module_;
  std::map<const void*, Tensor> tensors_;  // by TensorImpl
};

}  // namespace dapple
