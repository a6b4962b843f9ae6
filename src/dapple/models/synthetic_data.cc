// Seeded synthetic data shaped for any model. Batch `step` is drawn from a generator
// seeded by (seed, step), so it is the same in every process. Targets are a fixed function
// of the inputs so that a model can learn them (tests check that training lowers the loss):
//   float inputs, class targets: the argmax over `classes` contiguous chunks of the
//     flattened input of the chunk sums;
//   token inputs, per-token targets (language models): the input tokens themselves;
//   token inputs, class targets: the first token modulo the classes;
//   float targets: standard normal noise (no relation).
#include <ATen/CPUGeneratorImpl.h>

#include "dapple/common/error.h"
#include "dapple/models/data_internal.h"

namespace dapple::internal {
namespace {

std::vector<int64_t> WithBatch(int64_t n, const std::vector<int64_t>& shape) {
  std::vector<int64_t> s{n};
  s.insert(s.end(), shape.begin(), shape.end());
  return s;
}

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(const Model& model, uint64_t seed)
      : input_shape_(model.input_shape),
        target_shape_(model.target_shape),
        input_dtype_(model.input_dtype),
        target_dtype_(model.target_dtype),
        classes_(model.num_classes),
        vocab_(model.vocab_size),
        parts_(model.input_parts),
        seed_(seed) {
    if (target_dtype_ == torch::kInt64 && classes_ <= 0)
      ThrowInput("synthetic data for model {}: it declares no classes", model.name);
    if (input_dtype_ == torch::kInt64 && vocab_ <= 0)
      ThrowInput("synthetic data for model {}: token inputs without a vocabulary", model.name);
  }

  // Nominal: batches are drawn fresh for every step.
  int64_t size() const override { return 1 << 16; }

  Batch GlobalBatch(int64_t step, int64_t global_batch) override {
    DAPPLE_CHECK(step >= 0 && global_batch > 0);
    return Draw(SeededGenerator(seed_, /*stream=*/2, step), global_batch);
  }

  // Held out: 1024 samples drawn from a stream of their own, so never a training batch.
  Batch TestSet() override { return Draw(SeededGenerator(seed_, /*stream=*/3, 0), 1024); }

  // Drawn per batch: nothing held. The targets are functions of the inputs, so both parts
  // are drawn whatever the process reads.
  int64_t HeldBytes() const override { return 0; }

 private:
  Batch Draw(at::Generator gen, int64_t global_batch) const {
    Batch b;
    if (!parts_.empty()) {
      std::vector<torch::Tensor> parts;
      for (size_t i = 0; i < parts_.size(); ++i)
        parts.push_back(Part(gen, WithBatch(global_batch, parts_[i].shape), parts_[i].dtype, i));
      b.inputs = PackInputs(parts, input_dtype_);
    } else {
      b.inputs = Part(gen, WithBatch(global_batch, input_shape_), input_dtype_, 0);
    }
    b.targets = Targets(b.inputs, gen);
    return b;
  }

  // Input part `i` (Note [Packed inputs]): token ids or noise; an integer part after the
  // first is ones for a mask (attention_mask), else zeros (token_type_ids).
  torch::Tensor Part(at::Generator& gen, const std::vector<int64_t>& shape, torch::Dtype dtype,
                     size_t i) const {
    if (c10::isFloatingType(dtype))
      return torch::randn(shape, gen, torch::TensorOptions().dtype(dtype));
    if (i == 0) return torch::randint(0, vocab_, shape, gen, torch::kLong);
    const bool mask = parts_[i].name.find("mask") != std::string::npos;
    return mask ? torch::ones(shape, torch::kLong) : torch::zeros(shape, torch::kLong);
  }

  torch::Tensor Targets(const torch::Tensor& x, at::Generator& gen) const {
    int64_t n = x.size(0);
    auto shape = WithBatch(n, target_shape_);
    if (target_dtype_ != torch::kInt64)
      return torch::randn(shape, gen, torch::TensorOptions().dtype(target_dtype_));
    if (x.scalar_type() == torch::kInt64) {
      if (!target_shape_.empty() && x.sizes() == torch::IntArrayRef(shape))
        return x.remainder(classes_);
      return x.flatten(1).select(1, 0).remainder(classes_).reshape(shape);
    }
    torch::Tensor flat = x.flatten(1);
    int64_t d = flat.size(1), chunks = std::min(classes_, d), width = d / chunks;
    torch::Tensor cls = flat.slice(1, 0, chunks * width).view({n, chunks, width}).sum(2).argmax(1);
    if (!target_shape_.empty()) cls = cls.view({n}).expand(shape).contiguous();
    return cls;
  }

  std::vector<int64_t> input_shape_, target_shape_;
  torch::Dtype input_dtype_, target_dtype_;
  int64_t classes_, vocab_;
  std::vector<InputPart> parts_;
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<Dataset> MakeSyntheticDataset(const Model& model, uint64_t seed) {
  return std::make_unique<SyntheticDataset>(model, seed);
}

}  // namespace dapple::internal
