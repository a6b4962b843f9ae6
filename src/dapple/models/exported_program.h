// A program saved by torch.export.save (a PT2 archive) as dapple runs it: the serialized graph
// read into a list of ATen calls, and the archive's weights read one by one on demand
// (Note [Exported programs run through the dispatcher], docs/torch-export.md).
//
// Note [Exported programs run through the dispatcher]: libtorch 2.11 loads exported programs
// in C++ only for inference (AOTInductor runs compiled code; NativeRT runs under
// InferenceMode with read-only weights). Its pieces for reading them are public, so dapple
// reads the archive with libtorch's zip reader (caffe2::serialize::PyTorchStreamReader), parses
// models/model.json into libtorch's own C++ types of the serialization schema
// (torch/csrc/utils/generated_serialization_types.h), and runs each node by looking its
// operator up in c10::Dispatcher and calling it boxed. A boxed call dispatches through the
// Autograd key, so autograd records the graph as eager PyTorch does, and parameters are plain
// tensors the optimizers update. ATen operators run, and the integer arithmetic of dynamic
// shapes (_operator.mul/add/sub/floordiv on sym_size results); anything else (a custom
// operator, a higher-order operator such as torch.cond) is refused in one line naming it.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace caffe2::serialize {
class PyTorchStreamReader;
}

namespace dapple {

// One argument of a node, in the operator schema's order.
struct ExportArg {
  // kSymInt: an integer computed in the graph (a batch size); kSymInts: a list of sizes, each
  // an integer of `constant` or, where `values` is not -1, a value of the graph.
  enum class Kind { kConstant, kTensor, kTensors, kOptionalTensors, kSymInt, kSymInts };
  Kind kind = Kind::kConstant;
  c10::IValue constant;     // kConstant; kSymInts: the list's constant entries
  std::vector<int> values;  // the value ids read; -1 for a None or a constant entry
};

struct ExportNode {
  std::string name;                       // the node's name in the graph ("linear_3")
  std::string target;                     // "torch.ops.aten.linear.default"
  std::optional<c10::OperatorHandle> op;  // none for a Python operator on integers
  std::string python_op;                  // "mul", "add", "sub", "floordiv" (of _operator)
  std::vector<ExportArg> args;
  // Value ids defined by each of the operator's returns (several for a Tensor[] return, none
  // for an unused one).
  std::vector<std::vector<int>> outputs;
  // The modules the node came from, outermost first, without the root: (path, type).
  std::vector<std::pair<std::string, std::string>> module_stack;
  // Values written in place (an argument whose schema alias is written: add_, batch_norm's
  // running statistics).
  std::vector<int> writes;
  // The index in `args` of a training flag (batch_norm's `training`, dropout's `train`), -1
  // for none: evaluation runs it false (Note [Evaluation of a training graph]).
  int mode_arg = -1;
  // Counts batches into a buffer (BatchNorm's num_batches_tracked.add_(1)); skipped in
  // evaluation.
  bool counts_batches = false;
};

// A graph input that is not a user input: a parameter, buffer or tensor constant (or a
// buffer that is not persistent), by its fully qualified name in the model
// ("blocks.0.ln1.weight").
struct ExportTensorInput {
  enum class Kind { kParameter, kBuffer, kConstant };
  Kind kind = Kind::kParameter;
  int value = 0;
  std::string fqn;
};

struct ExportGraph {
  std::vector<std::string> value_names;  // by value id
  std::vector<ExportTensorInput> tensors;
  std::vector<int> user_inputs;   // value ids, in forward's order
  std::vector<int> user_outputs;  // value ids (a tuple or dataclass flattened)
  std::vector<std::string> forward_arg_names;
  std::vector<ExportNode> nodes;
  // The sample shape of each tensor value as the export saw it (without the batch
  // dimension), where known.
  std::map<int, std::vector<int64_t>> sample_shapes;
  // Symbolic sizes: each integer value's expression ("s95"), and each tensor value's
  // dimensions' expressions ("" for a fixed size).
  std::map<int, std::string> sym_exprs;
  std::map<int, std::vector<std::string>> dim_exprs;
  // Each user input's dtype as exported (float32 read as the model's dtype).
  std::map<int, c10::ScalarType> input_dtypes;
  int num_values() const { return static_cast<int>(value_names.size()); }
  // The name of user input `i`: forward's argument name ("attention_mask").
  std::string InputName(size_t i) const {
    return forward_arg_names.size() == user_inputs.size() ? forward_arg_names[i]
                                                          : value_names[user_inputs[i]];
  }
};

// The archive: its graph, and its weights read when asked for.
class ExportArchive {
 public:
  // Opens `path` and reads its graph. `dtype` is the training dtype: float32 dtype arguments
  // in the graph become `dtype` (Note [Float dtypes follow the model]). Throws InputError
  // naming `path` for a file that is not an exported program, one exported in evaluation
  // mode, or an operation dapple cannot run.
  ExportArchive(const std::string& path, torch::Dtype dtype);
  ~ExportArchive();

  const ExportGraph& graph() const { return graph_; }
  // Reads the tensor named `fqn` (a parameter, buffer or constant) from the archive, floating
  // point values in `dtype`. Names that share a record (tied weights) give one tensor.
  torch::Tensor Read(const std::string& fqn);
  // The sizes of `fqn` as the archive holds it, without reading it.
  std::vector<int64_t> Sizes(const std::string& fqn) const;
  // The record that holds `fqn`: names that share one are tied.
  std::string RecordOf(const std::string& fqn) const;
  // Every tensor name in the archive's weights and constants.
  std::vector<std::string> Names() const;
  // Writes the archive to `output` with the weights named in `values` replaced by them, each
  // in its record's dtype and layout (Note [A program back]); the rest is copied as it is.
  void WriteWithWeights(const std::map<std::string, torch::Tensor>& values,
                        const std::string& output);
  // Forgets the tensors read so far (they live on in whoever holds them).
  void ForgetRead() { read_.clear(); }

 private:
  struct Record {
    std::string record;  // "data/weights/weight_0"
    c10::ScalarType dtype = c10::ScalarType::Float;
    std::vector<int64_t> sizes, strides;
    int64_t storage_offset = 0;
  };
  void ReadConfigs();

  std::string path_;
  torch::Dtype dtype_;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader_;
  ExportGraph graph_;
  std::map<std::string, Record> records_;      // by fqn
  std::map<std::string, torch::Tensor> read_;  // by record: one tensor for tied names
};

// Runs `nodes` (indices into graph.nodes) in order on `env` (IValues by value id), in
// training mode or not (Note [Evaluation of a training graph]).
void RunNodes(const ExportGraph& graph, const std::vector<int>& nodes, bool training,
              std::vector<c10::IValue>* env);

// Whether `model` names an exported program (ends in .pt2).
bool IsExportedProgramPath(const std::string& model);

}  // namespace dapple
