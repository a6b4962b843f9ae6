// ExportArchive: see exported_program.h.
#include "dapple/models/exported_program.h"

#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <torch/csrc/utils/generated_serialization_types.h>

#include <cstring>
#include <set>

#include "dapple/common/error.h"
#include "dapple/models/export_node_reader.h"

namespace dapple {
namespace {

using internal::DtypeOf;
using internal::StaticInt;
using internal::ValueId;
using Tag = internal::ser::Argument::Tag;
namespace ser = torch::_export;

const c10::IValue* NamedConstant(const ExportNode& n, const std::string& arg) {
  const auto& args = n.op->schema().arguments();
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name() == arg && n.args[i].kind == ExportArg::Kind::kConstant)
      return &n.args[i].constant;
  return nullptr;
}

// A program exported in evaluation mode normalises with running statistics and drops no
// activations; training it would silently differ from PyTorch's training.
void CheckTrainingMode(const ExportGraph& g, const std::string& file) {
  for (const ExportNode& n : g.nodes) {
    const c10::IValue* flag = nullptr;
    if (n.target == "torch.ops.aten.batch_norm.default") flag = NamedConstant(n, "training");
    if (n.target == "torch.ops.aten.dropout.default") flag = NamedConstant(n, "train");
    bool eval = (flag && flag->isBool() && !flag->toBool()) ||
                n.target.find("_native_batch_norm_legit_no_training") != std::string::npos;
    if (eval) {
      ThrowInput(
          "{}: exported in evaluation mode ({} of node {}); export the model in training mode: "
          "torch.export.export(model.train(), args)",
          file, n.target, n.name);
    }
  }
}

std::string RecordText(caffe2::serialize::PyTorchStreamReader& r, const std::string& name) {
  auto [data, size] = r.getRecord(name);
  return std::string(static_cast<const char*>(data.get()), size);
}

// A graph input of the signature: a parameter, buffer or tensor constant by its name in the
// model, or a user input.
void ReadInputSpec(const ser::InputSpec& in, ExportGraph* g, std::map<std::string, int>* ids,
                   const std::string& path) {
  using K = ExportTensorInput::Kind;
  switch (in.tag()) {
    case ser::InputSpec::Tag::PARAMETER: {
      const auto& p = in.get_parameter();
      g->tensors.push_back(
          {K::kParameter, ValueId(g, ids, p.get_arg().get_name()), p.get_parameter_name()});
      break;
    }
    case ser::InputSpec::Tag::BUFFER: {
      // A buffer registered with persistent=False (BERT's position_ids) is not in the
      // module's state_dict: a constant here.
      const auto& b = in.get_buffer();
      g->tensors.push_back({b.get_persistent() ? K::kBuffer : K::kConstant,
                            ValueId(g, ids, b.get_arg().get_name()), b.get_buffer_name()});
      break;
    }
    case ser::InputSpec::Tag::TENSOR_CONSTANT: {
      const auto& c = in.get_tensor_constant();
      g->tensors.push_back(
          {K::kConstant, ValueId(g, ids, c.get_arg().get_name()), c.get_tensor_constant_name()});
      break;
    }
    case ser::InputSpec::Tag::USER_INPUT: {
      const ser::Argument& a = in.get_user_input().get_arg();
      if (a.tag() != Tag::AS_TENSOR)
        ThrowInput("{}: forward takes an input that is not a tensor", path);
      g->user_inputs.push_back(ValueId(g, ids, a.get_as_tensor().get_name()));
      break;
    }
    default:
      ThrowInput("{}: graph input of kind {} is not supported", path, static_cast<int>(in.tag()));
  }
}

// A graph output of the signature: a user output or the loss (buffer mutations are not
// outputs of a training-IR program).
void ReadOutputSpec(const ser::OutputSpec& out, ExportGraph* g, std::map<std::string, int>* ids,
                    const std::string& path) {
  if (out.tag() == ser::OutputSpec::Tag::LOSS_OUTPUT) {
    g->user_outputs.push_back(ValueId(g, ids, out.get_loss_output().get_arg().get_name()));
    return;
  }
  if (out.tag() != ser::OutputSpec::Tag::USER_OUTPUT) {
    ThrowInput(
        "{}: graph output of kind {} (a functionalized program); save what "
        "torch.export.export returns, in training mode",
        path, static_cast<int>(out.tag()));
  }
  const ser::Argument& a = out.get_user_output().get_arg();
  if (a.tag() != Tag::AS_TENSOR)
    ThrowInput("{}: forward returns a value that is not a tensor", path);
  g->user_outputs.push_back(ValueId(g, ids, a.get_as_tensor().get_name()));
}

// The sizes of the graph's values as the export saw them (sample shapes, symbolic
// expressions) and the user inputs' dtypes.
void ReadShapes(const ser::Graph& graph, const std::map<std::string, int>& ids, torch::Dtype dtype,
                const std::string& path, ExportGraph* g) {
  const std::set<int> inputs(g->user_inputs.begin(), g->user_inputs.end());
  for (const auto& [name, meta] : graph.get_tensor_values()) {
    auto id = ids.find(name);
    if (id == ids.end()) continue;
    if (inputs.count(id->second))
      g->input_dtypes[id->second] = DtypeOf(meta.get_dtype(), dtype, path + ": input " + name);
    std::vector<int64_t> sample;
    bool known = true;
    std::vector<std::string>& exprs = g->dim_exprs[id->second];
    for (size_t i = 0; i < meta.get_sizes().size(); ++i) {
      const ser::SymInt& d = meta.get_sizes()[i];
      bool fixed = d.tag() == ser::SymInt::Tag::AS_INT;
      exprs.push_back(fixed ? "" : d.get_as_expr().get_expr_str());
      if (i == 0) continue;
      known &= fixed;
      if (known) sample.push_back(d.get_as_int());
    }
    if (known) g->sample_shapes[id->second] = sample;
  }
  for (const auto& [name, sym] : graph.get_sym_int_values()) {
    auto id = ids.find(name);
    if (id != ids.end() && sym.tag() == ser::SymInt::Tag::AS_EXPR)
      g->sym_exprs[id->second] = sym.get_as_expr().get_expr_str();
  }
}

}  // namespace

bool IsExportedProgramPath(const std::string& model) {
  return model.size() > 4 && model.compare(model.size() - 4, 4, ".pt2") == 0;
}

ExportArchive::ExportArchive(const std::string& path, torch::Dtype dtype)
    : path_(path), dtype_(dtype) {
  ser::ExportedProgram ep;
  try {
    reader_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
    ep = nlohmann::json::parse(RecordText(*reader_, "models/model.json"))
             .get<ser::ExportedProgram>();
  } catch (const std::exception& e) {
    std::string what = e.what();
    ThrowInput(
        "{}: not a program saved by torch.export.save (torch.export.save(torch.export.export("
        "model.train(), args), path)): {}",
        path, what.substr(0, what.find('\n')));
  }
  const ser::GraphModule& gm = ep.get_graph_module();
  std::map<std::string, int> ids;
  for (const ser::InputSpec& in : gm.get_signature().get_input_specs())
    ReadInputSpec(in, &graph_, &ids, path);
  internal::ReadNodes(gm.get_graph(), &graph_, &ids, dtype, path);
  for (const ser::OutputSpec& out : gm.get_signature().get_output_specs())
    ReadOutputSpec(out, &graph_, &ids, path);
  for (const auto& entry : gm.get_module_call_graph())
    if (entry.get_fqn().empty() && entry.get_signature())
      graph_.forward_arg_names =
          entry.get_signature()->get_forward_arg_names().value_or(std::vector<std::string>{});
  std::set<int> buffers;
  for (const auto& t : graph_.tensors)
    if (t.kind == ExportTensorInput::Kind::kBuffer) buffers.insert(t.value);
  for (ExportNode& n : graph_.nodes)
    for (int v : n.writes)
      n.counts_batches |= n.target == "torch.ops.aten.add_.Tensor" && buffers.count(v) > 0;
  ReadShapes(gm.get_graph(), ids, dtype, path, &graph_);
  CheckTrainingMode(graph_, path);
  ReadConfigs();
}

ExportArchive::~ExportArchive() = default;

std::vector<int64_t> ExportArchive::Sizes(const std::string& fqn) const {
  auto it = records_.find(fqn);
  if (it == records_.end()) ThrowInput("{}: tensor {} is not in the archive", path_, fqn);
  return it->second.sizes;
}

std::string ExportArchive::RecordOf(const std::string& fqn) const {
  auto it = records_.find(fqn);
  if (it == records_.end()) ThrowInput("{}: tensor {} is not in the archive", path_, fqn);
  return it->second.record;
}

std::vector<std::string> ExportArchive::Names() const {
  std::vector<std::string> names;
  for (const auto& [fqn, record] : records_) names.push_back(fqn);
  return names;
}

void ExportArchive::ReadConfigs() {
  for (const char* config :
       {"data/weights/model_weights_config.json", "data/constants/model_constants_config.json"}) {
    if (!reader_->hasRecord(config)) continue;
    std::string dir = std::string(config).substr(0, std::string(config).rfind('/') + 1);
    auto payload = nlohmann::json::parse(RecordText(*reader_, config)).get<ser::PayloadConfig>();
    for (const auto& [fqn, meta] : payload.get_config()) {
      if (meta.get_use_pickle())
        ThrowInput("{}: {} is stored pickled; save with torch.export.save of PyTorch 2.8 or later",
                   path_, fqn);
      if (!meta.get_tensor_meta()) ThrowInput("{}: {} has no tensor metadata", path_, fqn);
      const ser::TensorMeta& t = *meta.get_tensor_meta();
      Record r;
      r.record = dir + meta.get_path_name();
      r.dtype = DtypeOf(t.get_dtype(), torch::kFloat32, path_ + ": " + fqn);
      for (const auto& s : t.get_sizes()) r.sizes.push_back(StaticInt(s, path_));
      for (const auto& s : t.get_strides()) r.strides.push_back(StaticInt(s, path_));
      r.storage_offset = StaticInt(t.get_storage_offset(), path_);
      records_[fqn] = std::move(r);
    }
  }
}

// Note [A program back]: a trained program is the user's archive with its weight records
// rewritten: the graph, signature and constants are the exported ones, so torch.export.load
// runs it as it ran the original. A record's bytes keep their dtype (a float32 model trained
// in float64 goes back in float32), sizes, strides and offset; a record shared by tied names
// gets the value of the first name given. The writer adds its own .data/version and
// serialization id.
void ExportArchive::WriteWithWeights(const std::map<std::string, torch::Tensor>& values,
                                     const std::string& output) {
  std::map<std::string, torch::Tensor> by_record;
  for (const auto& [fqn, r] : records_)
    if (auto it = values.find(fqn); it != values.end() && !by_record.count(r.record)) {
      auto [data, bytes] = reader_->getRecord(r.record);
      const int64_t itemsize = static_cast<int64_t>(c10::elementSize(r.dtype));
      torch::Tensor storage = torch::empty({static_cast<int64_t>(bytes) / itemsize}, r.dtype);
      std::memcpy(storage.data_ptr(), data.get(), bytes);
      torch::NoGradGuard no_grad;
      storage.as_strided(r.sizes, r.strides, r.storage_offset).copy_(it->second);
      by_record[r.record] = storage;
    }
  caffe2::serialize::PyTorchStreamWriter writer(output);
  for (const std::string& name : reader_->getAllRecords()) {
    if (name == ".data/version" || name == ".data/serialization_id") continue;
    if (auto it = by_record.find(name); it != by_record.end()) {
      writer.writeRecord(name, it->second.data_ptr(), it->second.nbytes());
    } else {
      auto [data, bytes] = reader_->getRecord(name);
      writer.writeRecord(name, data.get(), bytes);
    }
  }
  writer.writeEndOfFile();
}

torch::Tensor ExportArchive::Read(const std::string& fqn) {
  auto it = records_.find(fqn);
  if (it == records_.end()) ThrowInput("{}: tensor {} is not in the archive", path_, fqn);
  const Record& r = it->second;
  if (auto done = read_.find(r.record); done != read_.end()) return done->second;
  auto [data, bytes] = reader_->getRecord(r.record);
  const int64_t itemsize = static_cast<int64_t>(c10::elementSize(r.dtype));
  torch::Tensor storage = torch::empty({static_cast<int64_t>(bytes) / itemsize}, r.dtype);
  std::memcpy(storage.data_ptr(), data.get(), bytes);
  torch::Tensor t = storage.as_strided(r.sizes, r.strides, r.storage_offset).clone();
  if (t.is_floating_point()) t = t.to(dtype_);
  read_[r.record] = t;
  return t;
}

}  // namespace dapple
