// The optimizers a stage applies once per iteration (SGD with momentum, Adam, AdamW, all
// torch::optim), and their per-parameter state as named tensors, so a checkpoint can hold
// it per layer and a different plan can load it back.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dapple {

enum class OptimizerKind { kSgd, kAdam, kAdamW };

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.01;
  double momentum = 0.9;              // SGD only
  double weight_decay = -1;           // < 0: the optimizer's default (0; AdamW 0.01)
  double beta1 = 0.9, beta2 = 0.999;  // Adam and AdamW only
  double eps = 1e-8;                  // Adam and AdamW only
  // Weight decay only on parameters of 2 or more dimensions (matrices, embeddings), as
  // nanoGPT and Megatron: none on biases and normalisation weights.
  bool no_decay_on_norm_and_bias = false;
};

// Throws InputError naming the flag when a value is not finite or out of range: --lr above
// 0, --momentum in [0, 1), --weight-decay at least 0.
void CheckOptimizerOptions(const OptimizerOptions& o);

// "sgd", "adam", "adamw"; throws InputError listing them.
OptimizerKind ParseOptimizerKind(const std::string& s);
std::string ToString(OptimizerKind k);

// An optimizer over `params` (a stage's parameters). An empty list is allowed (a stage of
// parameter-free layers); its step does nothing.
std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const OptimizerOptions& o,
                                                       const std::vector<torch::Tensor>& params);

// Sets the learning rate of every parameter group (a schedule's rate for the next step).
void SetLearningRate(torch::optim::Optimizer& opt, double lr);

// State of parameter `p` as named tensors ("momentum_buffer"; "step", "exp_avg",
// "exp_avg_sq", "max_exp_avg_sq"); empty before its first step.
std::map<std::string, torch::Tensor> ExportParamState(torch::optim::Optimizer& opt,
                                                      OptimizerKind kind, const torch::Tensor& p);
// Bytes of the optimizer state of every parameter of `opt` (0 before the first step).
int64_t OptimizerStateBytes(torch::optim::Optimizer& opt, OptimizerKind kind);
// Installs state saved by ExportParamState for `p` (an empty map clears it).
void ImportParamState(torch::optim::Optimizer& opt, OptimizerKind kind, const torch::Tensor& p,
                      const std::map<std::string, torch::Tensor>& state);

// The per-parameter optimizer state that checkpoints save and load (as ExportParamState and
// ImportParamState name it), however the optimizer holds it: whole per parameter, or in
// shards across a stage's replicas (Note [Optimizer sharding], sharded_optimizer.h).
class ParamStateStore {
 public:
  virtual ~ParamStateStore() = default;
  virtual OptimizerKind kind() const = 0;
  virtual std::map<std::string, torch::Tensor> Export(const torch::Tensor& p) = 0;
  // Throws std::out_of_range when `state` lacks a field the optimizer needs.
  virtual void Import(const torch::Tensor& p,
                      const std::map<std::string, torch::Tensor>& state) = 0;
};

// The state of a torch::optim optimizer that holds every parameter whole.
class WholeParamStates final : public ParamStateStore {
 public:
  WholeParamStates(torch::optim::Optimizer& opt, OptimizerKind kind) : opt_(opt), kind_(kind) {}
  OptimizerKind kind() const override { return kind_; }
  std::map<std::string, torch::Tensor> Export(const torch::Tensor& p) override {
    return ExportParamState(opt_, kind_, p);
  }
  void Import(const torch::Tensor& p, const std::map<std::string, torch::Tensor>& s) override {
    ImportParamState(opt_, kind_, p, s);
  }

 private:
  torch::optim::Optimizer& opt_;
  OptimizerKind kind_;
};

}  // namespace dapple
