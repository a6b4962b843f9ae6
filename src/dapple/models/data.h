// Training data (docs/design.md section 1): Fashion-MNIST (Debian package dataset-fashion-mnist),
// character-level text of the King James Bible (bible-kjv), and seeded synthetic data.
// Deterministic for a seed: global batch `step` is the same in every process.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dapple/models/model.h"

namespace dapple {

// Either tensor is undefined in a process that does not read it (DataParts).
struct Batch {
  torch::Tensor inputs;   // [n, input_shape...]
  torch::Tensor targets;  // [n, target_shape...]
  // n: the rows of whichever tensor is defined; 0 when neither is.
  int64_t rows() const {
    return inputs.defined() ? inputs.size(0) : targets.defined() ? targets.size(0) : 0;
  }
};

// Note [Data a stage reads]: a pipeline's first stage reads a batch's inputs and its last
// stage the targets; the stages between read neither and make no data set at all. A data set
// made for some of the parts loads (or maps, Note [Data pages off the resident set] in
// file_bytes.h) only the files those parts come from, and its batches leave the other
// tensor undefined; the values of what it does return are the same as with both parts.
struct DataParts {
  bool inputs = true;
  bool targets = true;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  // Samples in one epoch of the training split.
  virtual int64_t size() const = 0;
  // Global batch number `step` (0-based, epochs wrap with a fresh seeded shuffle):
  // exactly `global_batch` samples. Same result in every process for the same seed.
  virtual Batch GlobalBatch(int64_t step, int64_t global_batch) = 0;
  // Held-out samples for evaluation (empty tensors where there is no test split).
  virtual Batch TestSet() { return {}; }
  // The bytes of samples this process holds in memory or maps from files (mapped files
  // whole, though only the pages of the batch being gathered count in the resident set);
  // 0 for data drawn per batch.
  virtual int64_t HeldBytes() const = 0;
};

// How a user's data file is read (docs/your-model.md).
struct DataFileOptions {
  int64_t seq_len = 0;  // token files: samples are windows of seq_len tokens
  bool shuffle = true;  // false: global batch k holds samples k*GBS .. (k+1)*GBS-1, wrapping
  std::filesystem::path eval_path;  // held-out samples (TestSet); empty: none
};

// A user's data file rather than a named data set: a name with a '/' or a '.'.
bool IsDataFilePath(const std::string& name);

// "fashion-mnist", "kjv", "synthetic", or a data file (PATH.pt: a torch.save dict of
// `input` and `target` tensors, and a model's other inputs by name, packed as Note [Packed
// inputs] in model.h says; PATH.bin: flat little-endian uint16 token ids), shaped for
// `model` (its input_shape/target_shape). A missing Debian package throws InputError naming
// the package to install; a file that does not fit the model names the file and the field.
// Decompressed files are cached under `cache_dir`. Only the parts in `parts` are read
// (Note [Data a stage reads]).
std::unique_ptr<Dataset> MakeDataset(const std::string& name, const Model& model, uint64_t seed,
                                     const std::filesystem::path& cache_dir,
                                     const DataFileOptions& files = {}, DataParts parts = {});

// Checks a user's data file (and the held-out file of `files`) against `model` as
// MakeDataset does, with the same errors, reading none of the inputs' values: a launcher's
// check before any process starts, at no memory.
void CheckDataFile(const std::string& name, const Model& model, const DataFileOptions& files);

// The input sample of data file `path` (shape without the batch dimension, dtype), for
// models whose input is not known before the data (TorchScript). Token files: [seq_len]
// int64. Throws InputError naming the file when it is malformed.
std::pair<std::vector<int64_t>, torch::Dtype> DataFileSample(const std::filesystem::path& path,
                                                             int64_t seq_len);

// Rows [range.begin, range.end) of a batch (of its defined tensors).
Batch SliceBatch(const Batch& b, int64_t begin, int64_t end);

// Where decompressed data sets are cached by default: $DAPPLE_CACHE_DIR, else
// $XDG_CACHE_HOME/dapple, else ~/.cache/dapple.
std::filesystem::path DefaultDataCacheDir();

}  // namespace dapple
