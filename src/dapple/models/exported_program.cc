// ExportArchive and RunNodes: see exported_program.h.
#include "dapple/models/exported_program.h"

#include <ATen/ScalarOps.h>
#include <ATen/core/stack.h>
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <torch/csrc/utils/generated_serialization_types.h>

#include <cstring>
#include <set>

#include "dapple/common/error.h"

namespace dapple {
namespace {

namespace ser = torch::_export;
using Tag = ser::Argument::Tag;

// Note [Float dtypes follow the model]: export bakes the dtypes a trace saw into the graph
// (`torch.zeros(..., dtype=x.dtype)` becomes dtype=float32). A model trained in float64 has
// its float32 dtype arguments read as float64, as `model.double()` would make them.
c10::ScalarType DtypeOf(ser::ScalarType t, torch::Dtype model, const std::string& where) {
  switch (t) {
    case ser::ScalarType::BYTE: return c10::kByte;
    case ser::ScalarType::CHAR: return c10::kChar;
    case ser::ScalarType::SHORT: return c10::kShort;
    case ser::ScalarType::INT: return c10::kInt;
    case ser::ScalarType::LONG: return c10::kLong;
    case ser::ScalarType::HALF: return c10::kHalf;
    case ser::ScalarType::FLOAT: return model;
    case ser::ScalarType::DOUBLE: return c10::kDouble;
    case ser::ScalarType::BOOL: return c10::kBool;
    case ser::ScalarType::BFLOAT16: return c10::kBFloat16;
    default: ThrowInput("{}: dtype {} is not supported", where, ser::printEnum(t));
  }
}

int64_t StaticInt(const ser::SymInt& s, const std::string& where) {
  if (s.tag() != ser::SymInt::Tag::AS_INT)
    ThrowInput("{}: a symbolic size; export with static shapes", where);
  return s.get_as_int();
}

// The value id of `name`, added when new.
int ValueId(ExportGraph* g, std::map<std::string, int>* ids, const std::string& name) {
  auto [it, added] = ids->emplace(name, g->num_values());
  if (added) g->value_names.push_back(name);
  return it->second;
}

class NodeReader {
 public:
  NodeReader(ExportGraph* g, std::map<std::string, int>* ids, torch::Dtype dtype,
             std::string file)
      : g_(g), ids_(ids), dtype_(dtype), file_(std::move(file)) {}

  ExportNode Read(const ser::Node& n) {
    ExportNode node;
    node.name = n.get_name().value_or("");
    node.target = n.get_target();
    where_ = fmt::format("{}: operation {} (node {})", file_, node.target, node.name);
    for (const char* op : {"mul", "add", "sub", "floordiv"})
      if (node.target == std::string("_operator.") + op) node.python_op = op;
    if (!node.python_op.empty()) {
      for (const ser::NamedArgument& a : n.get_inputs()) node.args.push_back(Arg(a.get_arg()));
      for (const ser::Argument& out : n.get_outputs()) node.outputs.push_back(Outputs(out));
      return node;
    }
    node.op = FindOperator(node.target);
    const c10::FunctionSchema& schema = node.op->schema();
    std::map<std::string, const ser::Argument*> given;
    for (const ser::NamedArgument& a : n.get_inputs()) given[a.get_name()] = &a.get_arg();
    for (const c10::Argument& a : schema.arguments()) {
      auto it = given.find(a.name());
      if (it != given.end()) {
        node.args.push_back(Arg(*it->second));
        WrapNumber(a, &node.args.back());
      } else if (a.default_value()) {
        node.args.push_back({ExportArg::Kind::kConstant, *a.default_value(), {}});
      } else {
        ThrowInput("{}: argument {} is missing", where_, a.name());
      }
      const ExportArg& arg = node.args.back();
      if (a.alias_info() && a.alias_info()->isWrite() && arg.kind != ExportArg::Kind::kConstant)
        for (int v : arg.values) node.writes.push_back(v);
      bool flag = (node.target == "torch.ops.aten.batch_norm.default" && a.name() == "training") ||
                  (node.target == "torch.ops.aten.dropout.default" && a.name() == "train");
      if (flag) node.mode_arg = static_cast<int>(node.args.size()) - 1;
    }
    for (const ser::Argument& out : n.get_outputs()) node.outputs.push_back(Outputs(out));
    auto stack = n.get_metadata().find("nn_module_stack");
    if (stack != n.get_metadata().end()) node.module_stack = ModuleStack(stack->second);
    return node;
  }

 private:
  // A number where the schema takes a Tensor (`buffer.add_(1)` exports as add_.Tensor(self,
  // 1)) is a wrapped-number tensor, as PyTorch makes it: it takes part in type promotion as
  // a Python number does.
  static void WrapNumber(const c10::Argument& schema_arg, ExportArg* arg) {
    const c10::IValue& v = arg->constant;
    if (arg->kind != ExportArg::Kind::kConstant || schema_arg.type()->kind() != c10::TypeKind::TensorType)
      return;
    if (!v.isInt() && !v.isDouble() && !v.isBool()) return;
    at::Tensor t = c10::scalar_to_tensor(v.toScalar());
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    arg->constant = t;
  }

  // "torch.ops.aten.add.Tensor" -> aten::add.Tensor; "default" is the empty overload.
  std::optional<c10::OperatorHandle> FindOperator(const std::string& target) {
    const std::string prefix = "torch.ops.aten.";
    if (target.rfind(prefix, 0) != 0) {
      ThrowInput(
          "{}: operation {} is not an ATen operator; dapple runs the ATen operators of an "
          "exported program only",
          file_, target);
    }
    std::string rest = target.substr(prefix.size());
    size_t dot = rest.find('.');
    std::string name = "aten::" + rest.substr(0, dot);
    std::string overload = dot == std::string::npos ? "" : rest.substr(dot + 1);
    if (overload == "default") overload = "";
    auto op = c10::Dispatcher::singleton().findSchema({name, overload});
    if (!op) ThrowInput("{}: operation {} is not an operator of this libtorch", file_, target);
    return op;
  }

  ExportArg Tensors(const std::vector<ser::TensorArgument>& ts) {
    ExportArg a{ExportArg::Kind::kTensors, {}, {}};
    for (const auto& t : ts) a.values.push_back(ValueId(g_, ids_, t.get_name()));
    return a;
  }

  ExportArg Arg(const ser::Argument& a) {
    using K = ExportArg::Kind;
    auto constant = [](c10::IValue v) { return ExportArg{K::kConstant, std::move(v), {}}; };
    switch (a.tag()) {
      case Tag::AS_NONE: return constant(c10::IValue());
      case Tag::AS_TENSOR: return {K::kTensor, {}, {ValueId(g_, ids_, a.get_as_tensor().get_name())}};
      case Tag::AS_OPTIONAL_TENSOR: {
        const auto& o = a.get_as_optional_tensor();
        if (o.tag() != ser::OptionalTensorArgument::Tag::AS_TENSOR) return constant(c10::IValue());
        return {K::kTensor, {}, {ValueId(g_, ids_, o.get_as_tensor().get_name())}};
      }
      case Tag::AS_TENSORS: return Tensors(a.get_as_tensors());
      case Tag::AS_OPTIONAL_TENSORS: {
        ExportArg r{K::kOptionalTensors, {}, {}};
        for (const auto& o : a.get_as_optional_tensors())
          r.values.push_back(o.tag() == ser::OptionalTensorArgument::Tag::AS_TENSOR
                                 ? ValueId(g_, ids_, o.get_as_tensor().get_name())
                                 : -1);
        return r;
      }
      case Tag::AS_INT: return constant(a.get_as_int());
      case Tag::AS_INTS: return constant(c10::IValue(a.get_as_ints()));
      case Tag::AS_SYM_INT: {
        const auto& s = a.get_as_sym_int();
        if (s.tag() == ser::SymIntArgument::Tag::AS_INT) return constant(s.get_as_int());
        return {K::kSymInt, {}, {ValueId(g_, ids_, s.get_as_name())}};
      }
      case Tag::AS_SYM_INTS: {
        std::vector<int64_t> ints;
        std::vector<int> values;
        for (const auto& s : a.get_as_sym_ints()) {
          bool is_int = s.tag() == ser::SymIntArgument::Tag::AS_INT;
          ints.push_back(is_int ? s.get_as_int() : 0);
          values.push_back(is_int ? -1 : ValueId(g_, ids_, s.get_as_name()));
        }
        return {K::kSymInts, c10::IValue(ints), values};
      }
      case Tag::AS_FLOAT: return constant(a.get_as_float().get());
      case Tag::AS_FLOATS: {
        std::vector<double> v;
        for (const auto& f : a.get_as_floats()) v.push_back(f.get());
        return constant(c10::IValue(v));
      }
      case Tag::AS_BOOL: return constant(a.get_as_bool());
      case Tag::AS_BOOLS: {
        c10::List<bool> bools;
        for (bool b : a.get_as_bools()) bools.push_back(b);
        return constant(bools);
      }
      case Tag::AS_STRING: return constant(a.get_as_string());
      case Tag::AS_SCALAR_TYPE: return constant(DtypeOf(a.get_as_scalar_type(), dtype_, where_));
      case Tag::AS_LAYOUT: return constant(c10::kStrided);
      case Tag::AS_MEMORY_FORMAT: return constant(MemoryFormat(a.get_as_memory_format()));
      case Tag::AS_DEVICE: return constant(c10::Device(c10::kCPU));  // dapple runs on CPU
      default:
        ThrowInput("{}: an argument of kind {} cannot be run", where_, static_cast<int>(a.tag()));
    }
  }

  c10::MemoryFormat MemoryFormat(ser::MemoryFormat f) {
    switch (f) {
      case ser::MemoryFormat::ChannelsLast: return c10::MemoryFormat::ChannelsLast;
      case ser::MemoryFormat::ChannelsLast3d: return c10::MemoryFormat::ChannelsLast3d;
      case ser::MemoryFormat::PreserveFormat: return c10::MemoryFormat::Preserve;
      default: return c10::MemoryFormat::Contiguous;
    }
  }

  std::vector<int> Outputs(const ser::Argument& out) {
    if (out.tag() == Tag::AS_TENSOR) return {ValueId(g_, ids_, out.get_as_tensor().get_name())};
    if (out.tag() == Tag::AS_TENSORS) return Tensors(out.get_as_tensors()).values;
    if (out.tag() == Tag::AS_NONE) return {};
    if (out.tag() == Tag::AS_SYM_INT &&
        out.get_as_sym_int().tag() == ser::SymIntArgument::Tag::AS_NAME)
      return {ValueId(g_, ids_, out.get_as_sym_int().get_as_name())};
    ThrowInput("{}: returns a value of kind {}, which dapple does not run", where_,
               static_cast<int>(out.tag()));
  }

  // "key,path,type;key,path,type" (serialize.py), the root ("" path) left out.
  static std::vector<std::pair<std::string, std::string>> ModuleStack(const std::string& s) {
    std::vector<std::pair<std::string, std::string>> stack;
    size_t start = 0;
    while (start < s.size()) {
      size_t end = s.find(';', start);
      if (end == std::string::npos) end = s.size();
      std::string entry = s.substr(start, end - start);
      size_t a = entry.find(','), b = entry.rfind(',');
      if (a != std::string::npos && b > a) {
        std::string path = entry.substr(a + 1, b - a - 1);
        if (!path.empty()) stack.push_back({path, entry.substr(b + 1)});
      }
      start = end + 1;
    }
    return stack;
  }

  ExportGraph* g_;
  std::map<std::string, int>* ids_;
  torch::Dtype dtype_;
  std::string file_;
  std::string where_;
};

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
  for (const ser::InputSpec& in : gm.get_signature().get_input_specs()) {
    using K = ExportTensorInput::Kind;
    switch (in.tag()) {
      case ser::InputSpec::Tag::PARAMETER: {
        const auto& p = in.get_parameter();
        graph_.tensors.push_back({K::kParameter, ValueId(&graph_, &ids, p.get_arg().get_name()),
                                  p.get_parameter_name()});
        break;
      }
      case ser::InputSpec::Tag::BUFFER: {
        const auto& b = in.get_buffer();
        graph_.tensors.push_back(
            {K::kBuffer, ValueId(&graph_, &ids, b.get_arg().get_name()), b.get_buffer_name()});
        break;
      }
      case ser::InputSpec::Tag::TENSOR_CONSTANT: {
        const auto& c = in.get_tensor_constant();
        graph_.tensors.push_back({K::kConstant, ValueId(&graph_, &ids, c.get_arg().get_name()),
                                  c.get_tensor_constant_name()});
        break;
      }
      case ser::InputSpec::Tag::USER_INPUT: {
        const ser::Argument& a = in.get_user_input().get_arg();
        if (a.tag() != Tag::AS_TENSOR)
          ThrowInput("{}: forward takes an input that is not a tensor", path);
        graph_.user_inputs.push_back(ValueId(&graph_, &ids, a.get_as_tensor().get_name()));
        break;
      }
      default:
        ThrowInput("{}: graph input of kind {} is not supported", path,
                   static_cast<int>(in.tag()));
    }
  }
  NodeReader reader(&graph_, &ids, dtype, path);
  for (const ser::Node& n : gm.get_graph().get_nodes()) graph_.nodes.push_back(reader.Read(n));
  for (const ser::OutputSpec& out : gm.get_signature().get_output_specs()) {
    const ser::Argument* a = nullptr;
    if (out.tag() == ser::OutputSpec::Tag::USER_OUTPUT) a = &out.get_user_output().get_arg();
    if (out.tag() == ser::OutputSpec::Tag::LOSS_OUTPUT) {
      graph_.user_outputs.push_back(ValueId(&graph_, &ids, out.get_loss_output().get_arg().get_name()));
      continue;
    }
    if (!a) {
      ThrowInput(
          "{}: graph output of kind {} (a functionalized program); save what "
          "torch.export.export returns, in training mode",
          path, static_cast<int>(out.tag()));
    }
    if (a->tag() != Tag::AS_TENSOR) ThrowInput("{}: forward returns a value that is not a tensor", path);
    graph_.user_outputs.push_back(ValueId(&graph_, &ids, a->get_as_tensor().get_name()));
  }
  for (const auto& entry : gm.get_module_call_graph())
    if (entry.get_fqn().empty() && entry.get_signature())
      graph_.forward_arg_names = entry.get_signature()->get_forward_arg_names().value_or(
          std::vector<std::string>{});
  std::set<int> buffers;
  for (const auto& t : graph_.tensors)
    if (t.kind == ExportTensorInput::Kind::kBuffer) buffers.insert(t.value);
  for (ExportNode& n : graph_.nodes)
    for (int v : n.writes)
      n.counts_batches |= n.target == "torch.ops.aten.add_.Tensor" && buffers.count(v) > 0;
  for (const auto& [name, meta] : gm.get_graph().get_tensor_values()) {
    auto id = ids.find(name);
    if (id == ids.end()) continue;
    std::vector<int64_t> sample;
    bool known = true;
    std::vector<std::string>& exprs = graph_.dim_exprs[id->second];
    for (size_t i = 0; i < meta.get_sizes().size(); ++i) {
      const ser::SymInt& d = meta.get_sizes()[i];
      bool fixed = d.tag() == ser::SymInt::Tag::AS_INT;
      exprs.push_back(fixed ? "" : d.get_as_expr().get_expr_str());
      if (i == 0) continue;
      known &= fixed;
      if (known) sample.push_back(d.get_as_int());
    }
    if (known) graph_.sample_shapes[id->second] = sample;
  }
  for (const auto& [name, sym] : gm.get_graph().get_sym_int_values()) {
    auto id = ids.find(name);
    if (id != ids.end() && sym.tag() == ser::SymInt::Tag::AS_EXPR)
      graph_.sym_exprs[id->second] = sym.get_as_expr().get_expr_str();
  }
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

namespace {

c10::IValue ArgValue(const ExportArg& a, const std::vector<c10::IValue>& env) {
  switch (a.kind) {
    case ExportArg::Kind::kConstant: return a.constant;
    case ExportArg::Kind::kTensor:
    case ExportArg::Kind::kSymInt: return env[a.values[0]];
    case ExportArg::Kind::kTensors: {
      c10::List<at::Tensor> list;
      for (int v : a.values) list.push_back(env[v].toTensor());
      return list;
    }
    case ExportArg::Kind::kOptionalTensors: {
      c10::List<std::optional<at::Tensor>> list;
      for (int v : a.values)
        list.push_back(v < 0 ? std::nullopt : std::optional<at::Tensor>(env[v].toTensor()));
      return list;
    }
    case ExportArg::Kind::kSymInts: {
      std::vector<int64_t> ints = a.constant.toIntVector();
      for (size_t i = 0; i < ints.size(); ++i)
        if (a.values[i] >= 0) ints[i] = env[a.values[i]].toInt();
      return ints;
    }
  }
  return {};
}

int64_t PythonOp(const std::string& op, int64_t a, int64_t b) {
  if (op == "mul") return a * b;
  if (op == "add") return a + b;
  if (op == "sub") return a - b;
  int64_t q = a / b;  // floordiv: rounds toward minus infinity, as Python's //
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

// Note [Evaluation of a training graph]: a program exported in training mode has the mode
// baked in (batch_norm(training=True), dropout(train=True), num_batches_tracked.add_(1)).
// Evaluation (profiling probes, --eval) runs the same graph with those flags false and the
// batch count skipped, as the module's eval() would have traced it.
void RunNodes(const ExportGraph& graph, const std::vector<int>& nodes, bool training,
              std::vector<c10::IValue>* env) {
  torch::jit::Stack stack;
  for (int k : nodes) {
    const ExportNode& n = graph.nodes[k];
    if (!training && n.counts_batches) continue;
    stack.clear();
    for (const ExportArg& a : n.args) stack.push_back(ArgValue(a, *env));
    if (!training && n.mode_arg >= 0) stack[n.mode_arg] = false;
    if (!n.op) {
      (*env)[n.outputs.at(0).at(0)] =
          PythonOp(n.python_op, stack.at(0).toInt(), stack.at(1).toInt());
      continue;
    }
    n.op->callBoxed(stack);
    for (size_t i = 0; i < n.outputs.size() && i < stack.size(); ++i) {
      const std::vector<int>& ids = n.outputs[i];
      if (ids.empty()) continue;
      if (stack[i].isTensorList()) {
        auto list = stack[i].toTensorList();
        for (size_t j = 0; j < ids.size() && j < list.size(); ++j) (*env)[ids[j]] = list.get(j);
      } else {
        (*env)[ids[0]] = stack[i];
      }
    }
  }
}

}  // namespace dapple
