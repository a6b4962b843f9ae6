// Training data (docs/design.md section 1): Fashion-MNIST (Debian package dataset-fashion-mnist),
// character-level text of the King James Bible (bible-kjv), and seeded synthetic data.
// Deterministic for a seed: global batch `step` is the same in every process.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "dapple/models/model.h"

namespace dapple {

struct Batch {
  torch::Tensor inputs;   // [n, input_shape...]
  torch::Tensor targets;  // [n, target_shape...]
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
};

// "fashion-mnist", "kjv" or "synthetic", shaped for `model` (its input_shape/target_shape).
// A missing Debian package throws InputError naming the package to install. Decompressed
// files are cached under `cache_dir`.
std::unique_ptr<Dataset> MakeDataset(const std::string& name, const Model& model, uint64_t seed,
                                     const std::filesystem::path& cache_dir);

// Rows [range.begin, range.end) of a batch.
Batch SliceBatch(const Batch& b, int64_t begin, int64_t end);

// Where decompressed data sets are cached by default: $DAPPLE_CACHE_DIR, else
// $XDG_CACHE_HOME/dapple, else ~/.cache/dapple.
std::filesystem::path DefaultDataCacheDir();

}  // namespace dapple
