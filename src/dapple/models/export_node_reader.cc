// ReadNodes and its helpers: see export_node_reader.h.
#include "dapple/models/export_node_reader.h"

#include <ATen/ScalarOps.h>
#include <fmt/format.h>

#include "dapple/common/error.h"

namespace dapple::internal {

using Tag = ser::Argument::Tag;

// Note [Float dtypes follow the model]: export bakes the dtypes a trace saw into the graph
// (`torch.zeros(..., dtype=x.dtype)` becomes dtype=float32). A model trained in float64 has
// its float32 dtype arguments read as float64, as `model.double()` would make them.
c10::ScalarType DtypeOf(ser::ScalarType t, torch::Dtype model, const std::string& where) {
  switch (t) {
    case ser::ScalarType::BYTE:
      return c10::kByte;
    case ser::ScalarType::CHAR:
      return c10::kChar;
    case ser::ScalarType::SHORT:
      return c10::kShort;
    case ser::ScalarType::INT:
      return c10::kInt;
    case ser::ScalarType::LONG:
      return c10::kLong;
    case ser::ScalarType::HALF:
      return c10::kHalf;
    case ser::ScalarType::FLOAT:
      return model;
    case ser::ScalarType::DOUBLE:
      return c10::kDouble;
    case ser::ScalarType::BOOL:
      return c10::kBool;
    case ser::ScalarType::BFLOAT16:
      return c10::kBFloat16;
    default:
      ThrowInput("{}: dtype {} is not supported", where, ser::printEnum(t));
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

namespace {

class NodeReader {
 public:
  NodeReader(ExportGraph* g, std::map<std::string, int>* ids, torch::Dtype dtype, std::string file)
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
    if (arg->kind != ExportArg::Kind::kConstant ||
        schema_arg.type()->kind() != c10::TypeKind::TensorType)
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
      case Tag::AS_NONE:
        return constant(c10::IValue());
      case Tag::AS_TENSOR:
        return {K::kTensor, {}, {ValueId(g_, ids_, a.get_as_tensor().get_name())}};
      case Tag::AS_OPTIONAL_TENSOR: {
        const auto& o = a.get_as_optional_tensor();
        if (o.tag() != ser::OptionalTensorArgument::Tag::AS_TENSOR) return constant(c10::IValue());
        return {K::kTensor, {}, {ValueId(g_, ids_, o.get_as_tensor().get_name())}};
      }
      case Tag::AS_TENSORS:
        return Tensors(a.get_as_tensors());
      case Tag::AS_OPTIONAL_TENSORS: {
        ExportArg r{K::kOptionalTensors, {}, {}};
        for (const auto& o : a.get_as_optional_tensors())
          r.values.push_back(o.tag() == ser::OptionalTensorArgument::Tag::AS_TENSOR
                                 ? ValueId(g_, ids_, o.get_as_tensor().get_name())
                                 : -1);
        return r;
      }
      case Tag::AS_INT:
        return constant(a.get_as_int());
      case Tag::AS_INTS:
        return constant(c10::IValue(a.get_as_ints()));
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
      case Tag::AS_FLOAT:
        return constant(a.get_as_float().get());
      case Tag::AS_FLOATS: {
        std::vector<double> v;
        for (const auto& f : a.get_as_floats()) v.push_back(f.get());
        return constant(c10::IValue(v));
      }
      case Tag::AS_BOOL:
        return constant(a.get_as_bool());
      case Tag::AS_BOOLS: {
        c10::List<bool> bools;
        for (bool b : a.get_as_bools()) bools.push_back(b);
        return constant(bools);
      }
      case Tag::AS_STRING:
        return constant(a.get_as_string());
      case Tag::AS_SCALAR_TYPE:
        return constant(DtypeOf(a.get_as_scalar_type(), dtype_, where_));
      case Tag::AS_LAYOUT:
        return constant(c10::kStrided);
      case Tag::AS_MEMORY_FORMAT:
        return constant(MemoryFormat(a.get_as_memory_format()));
      case Tag::AS_DEVICE:
        return constant(c10::Device(c10::kCPU));  // dapple runs on CPU
      default:
        ThrowInput("{}: an argument of kind {} cannot be run", where_, static_cast<int>(a.tag()));
    }
  }

  c10::MemoryFormat MemoryFormat(ser::MemoryFormat f) {
    switch (f) {
      case ser::MemoryFormat::ChannelsLast:
        return c10::MemoryFormat::ChannelsLast;
      case ser::MemoryFormat::ChannelsLast3d:
        return c10::MemoryFormat::ChannelsLast3d;
      case ser::MemoryFormat::PreserveFormat:
        return c10::MemoryFormat::Preserve;
      default:
        return c10::MemoryFormat::Contiguous;
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

}  // namespace

void ReadNodes(const ser::Graph& graph, ExportGraph* g, std::map<std::string, int>* ids,
               torch::Dtype dtype, const std::string& file) {
  NodeReader reader(g, ids, dtype, file);
  for (const ser::Node& n : graph.get_nodes()) g->nodes.push_back(reader.Read(n));
}

}  // namespace dapple::internal
