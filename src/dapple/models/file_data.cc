// The user's data files: a torch.save dict of tensors, and flat uint16 token files
// (memory-mapped, the nanoGPT .bin convention). See data.h.
#include <caffe2/serialize/file_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/types.h>

#include <fstream>
#include <map>
#include <memory>

#include "dapple/common/error.h"
#include "dapple/models/data_internal.h"
#include "dapple/models/skipping_reader.h"

namespace dapple {
namespace internal {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Shape(torch::IntArrayRef s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::string SampleShape(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

// Which values a read of a torch.save file fills in. The others are not read: their tensors'
// shapes and dtypes are right, their memory untouched (skipping_reader.h), so that a check of
// a large file costs no memory.
enum class Values {
  kAll,
  kTargetOnly,  // the 'target' tensor's (small, and the class check reads them)
  kNone,        // shapes and dtypes only
};

// The tensors of a zip-format torch.save dict, by key, its records read from the file one by
// one (not the whole file into memory first).
std::map<std::string, torch::Tensor> ReadTensorDict(const std::filesystem::path& path,
                                                    Values values) {
  const std::string file = path.string();
  if (!std::ifstream(path, std::ios::binary)) ThrowInput("{}: cannot open the data file", file);
  std::shared_ptr<caffe2::serialize::ReadAdapterInterface> adapter;
  std::shared_ptr<SkippingReader> skipping;
  c10::IValue v;
  try {
    if (values == Values::kAll) {
      adapter = std::make_shared<caffe2::serialize::FileAdapter>(file);
    } else {
      adapter = skipping = std::make_shared<SkippingReader>(file, DataRecordOffsets(file));
    }
    caffe2::serialize::PyTorchStreamReader reader(adapter);
    v = torch::jit::readArchiveAndTensors("data", /*pickle_prefix=*/"", /*tensor_prefix=*/"data/",
                                          std::nullopt, std::nullopt, std::nullopt, reader);
  } catch (const std::exception& e) {
    std::string what = e.what();
    ThrowInput(
        "{}: not a zip-format torch.save file (write it with torch.save({{'input': x, "
        "'target': y}}, path)): {}",
        file, what.substr(0, what.find('\n')));
  }
  if (!v.isGenericDict()) ThrowInput("{}: expected a dict with keys 'input' and 'target'", file);
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& item : v.toGenericDict()) {
    if (!item.key().isString()) continue;
    const std::string key = item.key().toStringRef();
    if (!item.value().isTensor()) {
      if (key == "input" || key == "target") ThrowInput("{}: '{}' is not a tensor", file, key);
      continue;
    }
    const torch::Tensor t = item.value().toTensor();
    if (values == Values::kTargetOnly && key == "target") skipping->ReadSkipped(t.storage().data());
    tensors[key] = values == Values::kAll ? t.contiguous() : t;
  }
  return tensors;
}

// The inputs of a forward of several inputs packed (Note [Packed inputs]): the first is
// 'input', the others are read by their names. Without `values`, a tensor of the packed
// shape that holds no memory (on the meta device), for the checks.
torch::Tensor PackedInputs(const std::map<std::string, torch::Tensor>& tensors, const Model& m,
                           const std::string& file, Values values) {
  std::vector<torch::Tensor> parts;
  int64_t packed_width = 0;
  for (size_t i = 0; i < m.input_parts.size(); ++i) {
    const InputPart& p = m.input_parts[i];
    const std::string key = i == 0 ? "input" : p.name;
    auto it = tensors.find(key);
    if (it == tensors.end())
      ThrowInput("{}: no '{}' tensor; the model's forward takes input {}", file, key, p.name);
    const torch::Tensor& t = it->second;
    std::vector<int64_t> sample(t.sizes().begin() + (t.dim() > 0 ? 1 : 0), t.sizes().end());
    if (t.dim() == 0 || sample != p.shape || t.size(0) != tensors.at("input").size(0))
      ThrowInput("{}: '{}' has shape {}; the model's input {} takes {} samples of {}", file, key,
                 Shape(t.sizes()), p.name, tensors.at("input").size(0), SampleShape(p.shape));
    if (t.is_floating_point() != c10::isFloatingType(p.dtype))
      ThrowInput("{}: '{}' is {}, the model's input {} takes {}", file, key,
                 c10::toString(t.scalar_type()), p.name, c10::toString(p.dtype));
    parts.push_back(t);
    packed_width += t.numel() / t.size(0);
  }
  if (values == Values::kAll) return PackInputs(parts, m.input_dtype);
  return torch::empty({parts[0].size(0), packed_width},
                      torch::TensorOptions().dtype(m.input_dtype).device(torch::kMeta));
}

// Reads `input` and `target` of a zip-format torch.save dict; for a model of several inputs
// (`m`, when given), its inputs packed.
Batch ReadTensorFile(const std::filesystem::path& path, const Model* m, Values values) {
  const std::string file = path.string();
  const std::map<std::string, torch::Tensor> tensors = ReadTensorDict(path, values);
  Batch b;
  if (auto it = tensors.find("input"); it != tensors.end()) b.inputs = it->second;
  if (auto it = tensors.find("target"); it != tensors.end()) b.targets = it->second;
  if (!b.inputs.defined()) ThrowInput("{}: no 'input' tensor", file);
  if (!b.targets.defined()) ThrowInput("{}: no 'target' tensor", file);
  if (b.inputs.dim() == 0 || b.inputs.size(0) == 0)
    ThrowInput("{}: 'input' holds no samples", file);
  if (b.targets.dim() == 0 || b.targets.size(0) != b.inputs.size(0)) {
    ThrowInput("{}: 'target' has shape {} but 'input' has {} samples (first dimension)", file,
               Shape(b.targets.sizes()), b.inputs.size(0));
  }
  if (m && !m->input_parts.empty()) b.inputs = PackedInputs(tensors, *m, file, values);
  return b;
}

// Checks a batch read from `file` against the model's input and target.
void CheckFits(const Batch& b, const Model& m, const std::string& file) {
  std::vector<int64_t> in(b.inputs.sizes().begin() + 1, b.inputs.sizes().end());
  if (in != m.input_shape) {
    ThrowInput("{}: 'input' samples have shape {}, the model takes {}", file, SampleShape(in),
               SampleShape(m.input_shape));
  }
  bool int_model = !c10::isFloatingType(m.input_dtype);
  if (int_model != !b.inputs.is_floating_point()) {
    ThrowInput("{}: 'input' is {}, the model takes {}", file, c10::toString(b.inputs.scalar_type()),
               c10::toString(m.input_dtype));
  }
  std::vector<int64_t> t(b.targets.sizes().begin() + 1, b.targets.sizes().end());
  if (t != m.target_shape) {
    ThrowInput("{}: 'target' samples have shape {}, the model's loss takes {}", file,
               SampleShape(t), SampleShape(m.target_shape));
  }
  if (m.target_dtype == torch::kInt64) {
    if (b.targets.is_floating_point())
      ThrowInput("{}: 'target' is {}, the loss takes class indices (int64)", file,
                 c10::toString(b.targets.scalar_type()));
    int64_t lo = b.targets.min().item<int64_t>(), hi = b.targets.max().item<int64_t>();
    if (m.num_classes > 0 && (lo < 0 || hi >= m.num_classes)) {
      ThrowInput("{}: 'target' holds class {} but the model's output has {} classes (0..{})", file,
                 lo < 0 ? lo : hi, m.num_classes, m.num_classes - 1);
    }
  }
}

// Converts the parts in `parts` to the model's dtypes (floating inputs and targets follow
// the model) and drops the others.
Batch ToModel(const Batch& b, const Model& m, DataParts parts) {
  return {parts.inputs ? b.inputs.to(m.input_dtype) : torch::Tensor(),
          parts.targets ? b.targets.to(m.target_dtype) : torch::Tensor()};
}

// A memory-mapped token file: windows of seq_len tokens; the target is the same window
// shifted by one token.
class TokenFile {
 public:
  TokenFile(const std::filesystem::path& path, int64_t seq_len)
      : file_(path.string()), seq_(seq_len) {
    if (seq_ <= 0) ThrowInput("{}: a token file needs --seq-len", file_);
    bytes_ = FileBytes::Map(path);
    if (bytes_->size() % 2 != 0) {
      ThrowInput("{}: {} bytes is not a whole number of uint16 tokens", file_, bytes_->size());
    }
    if (bytes_->size() / 2 < seq_ + 1) {
      ThrowInput("{}: {} tokens are fewer than one window of --seq-len {} plus one", file_,
                 bytes_->size() / 2, seq_);
    }
  }

  int64_t windows() const { return (bytes_->size() / 2 - 1) / seq_; }
  int64_t bytes() const { return bytes_->size(); }
  const uint16_t* tokens() const { return reinterpret_cast<const uint16_t*>(bytes_->data()); }
  // One pass over the ids: throws naming the file when one is not below `vocab`.
  void CheckIds(int64_t vocab) const {
    if (vocab <= 0) return;
    const uint16_t* t = tokens();
    int64_t n = bytes_->size() / 2;
    for (int64_t i = 0; i < n; ++i) {
      if (t[i] >= vocab)
        ThrowInput("{}: token {} at position {} is outside the model's vocabulary of {}", file_,
                   t[i], i, vocab);
    }
    bytes_->ReleasePages();
  }
  // Windows `index` as inputs and targets (those in `parts`).
  Batch Windows(const torch::Tensor& index, DataParts parts) const {
    int64_t n = index.size(0);
    auto idx = index.accessor<int64_t, 1>();
    auto gather = [&](int64_t shift) {
      torch::Tensor out = torch::empty({n, seq_}, torch::kInt64);
      auto a = out.accessor<int64_t, 2>();
      for (int64_t r = 0; r < n; ++r) {
        const uint16_t* w = tokens() + idx[r] * seq_ + shift;
        for (int64_t j = 0; j < seq_; ++j) a[r][j] = w[j];
      }
      return out;
    };
    Batch b;
    if (parts.inputs) b.inputs = gather(0);
    if (parts.targets) b.targets = gather(1);
    bytes_->ReleasePages();
    return b;
  }

 private:
  std::string file_;
  int64_t seq_;
  std::shared_ptr<FileBytes> bytes_;
};

class TokenDataset : public Dataset {
 public:
  TokenDataset(const std::filesystem::path& path, const std::filesystem::path& eval_path,
               const Model& m, uint64_t seed, const DataFileOptions& o, DataParts parts)
      : train_(path, o.seq_len), seed_(seed), shuffle_(o.shuffle), parts_(parts) {
    CheckModel(path.string(), m, o.seq_len);
    train_.CheckIds(m.vocab_size > 0 ? m.vocab_size : m.num_classes);
    if (!eval_path.empty()) {
      TokenFile eval(eval_path, o.seq_len);
      eval.CheckIds(m.vocab_size > 0 ? m.vocab_size : m.num_classes);
      test_ = eval.Windows(torch::arange(eval.windows(), torch::kLong), parts_);
    }
  }
  int64_t size() const override { return train_.windows(); }
  Batch GlobalBatch(int64_t step, int64_t global_batch) override {
    std::vector<torch::Tensor> parts;
    int64_t n = size(), pos = step * global_batch, end = pos + global_batch;
    while (pos < end) {
      int64_t epoch = pos / n, offset = pos % n, take = std::min(end - pos, n - offset);
      parts.push_back(Order(epoch).slice(0, offset, offset + take));
      pos += take;
    }
    return train_.Windows(parts.size() == 1 ? parts[0] : torch::cat(parts), parts_);
  }
  Batch TestSet() override { return test_; }
  int64_t HeldBytes() const override {
    auto bytes = [](const torch::Tensor& t) { return t.defined() ? t.nbytes() : 0; };
    return train_.bytes() + static_cast<int64_t>(bytes(test_.inputs) + bytes(test_.targets));
  }

 private:
  static void CheckModel(const std::string& file, const Model& m, int64_t seq) {
    if (m.input_parts.size() > 1)
      ThrowInput("{}: a token file holds one input; the model's forward also takes input {}", file,
                 m.input_parts[1].name);
    if (m.input_dtype != torch::kInt64 || m.input_shape != std::vector<int64_t>{seq}) {
      ThrowInput("{}: token windows are int64 [{}] but the model takes {} {}", file, seq,
                 c10::toString(m.input_dtype), SampleShape(m.input_shape));
    }
  }
  const torch::Tensor& Order(int64_t epoch) {
    if (epoch != epoch_) {
      order_ = shuffle_ ? torch::randperm(size(), SeededGenerator(seed_, 1, epoch), torch::kLong)
                        : torch::arange(size(), torch::kLong);
      epoch_ = epoch;
    }
    return order_;
  }
  TokenFile train_;
  uint64_t seed_;
  bool shuffle_;
  DataParts parts_;
  Batch test_;
  int64_t epoch_ = -1;
  torch::Tensor order_;
};

}  // namespace

// What a data file is checked against and read for: the model's data fields, without its
// layers (a held-out set read after training keeps this, not the model).
Model DataShapeOf(const Model& m) {
  Model shape;
  shape.name = m.name;
  shape.input_shape = m.input_shape;
  shape.input_dtype = m.input_dtype;
  shape.target_shape = m.target_shape;
  shape.target_dtype = m.target_dtype;
  shape.num_classes = m.num_classes;
  shape.vocab_size = m.vocab_size;
  shape.input_parts = m.input_parts;
  return shape;
}

// Checks a torch.save data file against the model, reading no input values.
void CheckTensorFile(const std::filesystem::path& path, const Model& model) {
  CheckFits(ReadTensorFile(path, &model, Values::kTargetOnly), model, path.string());
}

std::unique_ptr<Dataset> MakeFileDataset(const std::filesystem::path& path, const Model& model,
                                         uint64_t seed, const DataFileOptions& o, DataParts parts) {
  if (!std::filesystem::is_regular_file(path)) ThrowInput("{}: no such data file", path.string());
  if (EndsWith(path.string(), ".bin"))
    return std::make_unique<TokenDataset>(path, o.eval_path, model, seed, o, parts);
  // A torch.save file is read whole (its pickled tensors cannot be mapped); the parts this
  // process does not read are dropped at once.
  Batch train = ReadTensorFile(path, &model, Values::kAll);
  CheckFits(train, model, path.string());
  train = ToModel(train, model, parts);
  auto data = std::make_unique<InMemoryDataset>(std::move(train), Batch{}, seed, o.shuffle);
  if (!o.eval_path.empty()) {
    // Checked now; read when evaluation asks, after training, so that training does not hold it.
    CheckTensorFile(o.eval_path, model);
    data->LoadTestLater([eval = o.eval_path, shape = DataShapeOf(model), parts] {
      return ToModel(ReadTensorFile(eval, &shape, Values::kAll), shape, parts);
    });
  }
  return data;
}

}  // namespace internal

void CheckDataFile(const std::string& name, const Model& model, const DataFileOptions& files) {
  const std::filesystem::path path = name;
  if (!std::filesystem::is_regular_file(path)) ThrowInput("{}: no such data file", name);
  if (internal::EndsWith(name, ".bin")) {  // mapped, its pages released after the id check
    internal::TokenDataset checked(path, files.eval_path, model, 0, files, DataParts{false, false});
    return;
  }
  internal::CheckTensorFile(path, model);
  if (!files.eval_path.empty()) internal::CheckTensorFile(files.eval_path, model);
}

std::pair<std::vector<int64_t>, torch::Dtype> DataFileSample(const std::filesystem::path& path,
                                                             int64_t seq_len) {
  if (!std::filesystem::is_regular_file(path)) ThrowInput("{}: no such data file", path.string());
  if (internal::EndsWith(path.string(), ".bin")) {
    internal::TokenFile t(path, seq_len);
    return {{seq_len}, torch::kInt64};
  }
  Batch b = internal::ReadTensorFile(path, nullptr, internal::Values::kNone);
  return {std::vector<int64_t>(b.inputs.sizes().begin() + 1, b.inputs.sizes().end()),
          b.inputs.scalar_type()};
}

}  // namespace dapple
