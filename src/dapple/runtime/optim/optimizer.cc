// Optimizer construction and per-parameter state export/import over torch::optim.
#include "dapple/runtime/optim/optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>

#include "dapple/common/error.h"

namespace dapple {
namespace {

// torch::optim keys a parameter's state by its TensorImpl.
void* Key(const torch::Tensor& p) { return p.unsafeGetTensorImpl(); }

template <typename State>
void ExportAdamLike(const State& s, std::map<std::string, torch::Tensor>& out) {
  out["step"] = torch::tensor(s.step(), torch::kInt64);
  out["exp_avg"] = s.exp_avg();
  out["exp_avg_sq"] = s.exp_avg_sq();
  if (s.max_exp_avg_sq().defined()) out["max_exp_avg_sq"] = s.max_exp_avg_sq();
}

template <typename State>
std::unique_ptr<State> ImportAdamLike(const std::map<std::string, torch::Tensor>& in) {
  auto s = std::make_unique<State>();
  s->step(in.at("step").item<int64_t>());
  s->exp_avg(in.at("exp_avg").clone());
  s->exp_avg_sq(in.at("exp_avg_sq").clone());
  if (in.count("max_exp_avg_sq")) s->max_exp_avg_sq(in.at("max_exp_avg_sq").clone());
  return s;
}

// One group of every parameter, or with `no_decay_on_norm_and_bias` two: parameters of 2 or
// more dimensions with `opts`' weight decay, the others (biases, normalisation weights)
// without, as nanoGPT splits them.
template <typename Opt, typename Options>
std::unique_ptr<torch::optim::Optimizer> MakeWithGroups(const Options& opts,
                                                        const std::vector<torch::Tensor>& params,
                                                        bool no_decay_on_norm_and_bias) {
  if (!no_decay_on_norm_and_bias) return std::make_unique<Opt>(params, opts);
  std::vector<torch::Tensor> decayed, plain;
  for (const auto& p : params) (p.dim() >= 2 ? decayed : plain).push_back(p);
  Options plain_opts = opts;
  plain_opts.weight_decay(0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!decayed.empty()) groups.emplace_back(decayed, std::make_unique<Options>(opts));
  if (!plain.empty()) groups.emplace_back(plain, std::make_unique<Options>(plain_opts));
  if (groups.empty()) return std::make_unique<Opt>(params, opts);  // no parameters
  return std::make_unique<Opt>(std::move(groups), opts);
}

}  // namespace

void CheckOptimizerOptions(const OptimizerOptions& o) {
  if (!std::isfinite(o.lr) || o.lr <= 0) ThrowInput("--lr {}: expected a number above 0", o.lr);
  if (!std::isfinite(o.momentum) || o.momentum < 0 || o.momentum >= 1)
    ThrowInput("--momentum {}: expected a number in [0, 1)", o.momentum);
  // -1 is the default (the optimizer's own decay).
  if (!std::isfinite(o.weight_decay) || (o.weight_decay < 0 && o.weight_decay != -1))
    ThrowInput("--weight-decay {}: expected a number of at least 0", o.weight_decay);
}

OptimizerKind ParseOptimizerKind(const std::string& s) {
  if (s == "sgd") return OptimizerKind::kSgd;
  if (s == "adam") return OptimizerKind::kAdam;
  if (s == "adamw") return OptimizerKind::kAdamW;
  ThrowInput("unknown optimizer '{}' (known: sgd, adam, adamw)", s);
}

std::string ToString(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kAdamW:
      return "adamw";
  }
  return "?";
}

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const OptimizerOptions& o,
                                                       const std::vector<torch::Tensor>& params) {
  switch (o.kind) {
    case OptimizerKind::kSgd: {
      torch::optim::SGDOptions opts(o.lr);
      opts.momentum(o.momentum);
      if (o.weight_decay >= 0) opts.weight_decay(o.weight_decay);
      return MakeWithGroups<torch::optim::SGD>(opts, params, o.no_decay_on_norm_and_bias);
    }
    case OptimizerKind::kAdam: {
      torch::optim::AdamOptions opts(o.lr);
      if (o.weight_decay >= 0) opts.weight_decay(o.weight_decay);
      opts.betas({o.beta1, o.beta2}).eps(o.eps);
      return MakeWithGroups<torch::optim::Adam>(opts, params, o.no_decay_on_norm_and_bias);
    }
    case OptimizerKind::kAdamW: {
      torch::optim::AdamWOptions opts(o.lr);
      if (o.weight_decay >= 0) opts.weight_decay(o.weight_decay);
      opts.betas({o.beta1, o.beta2}).eps(o.eps);
      return MakeWithGroups<torch::optim::AdamW>(opts, params, o.no_decay_on_norm_and_bias);
    }
  }
  DAPPLE_CHECK(false, "unknown optimizer kind");
  return nullptr;
}

void SetLearningRate(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
}

std::map<std::string, torch::Tensor> ExportParamState(torch::optim::Optimizer& opt,
                                                      OptimizerKind kind, const torch::Tensor& p) {
  std::map<std::string, torch::Tensor> out;
  auto it = opt.state().find(Key(p));
  if (it == opt.state().end()) return out;
  switch (kind) {
    case OptimizerKind::kSgd: {
      auto& s = static_cast<torch::optim::SGDParamState&>(*it->second);
      if (s.momentum_buffer().defined()) out["momentum_buffer"] = s.momentum_buffer();
      break;
    }
    case OptimizerKind::kAdam:
      ExportAdamLike(static_cast<torch::optim::AdamParamState&>(*it->second), out);
      break;
    case OptimizerKind::kAdamW:
      ExportAdamLike(static_cast<torch::optim::AdamWParamState&>(*it->second), out);
      break;
  }
  return out;
}

void ImportParamState(torch::optim::Optimizer& opt, OptimizerKind kind, const torch::Tensor& p,
                      const std::map<std::string, torch::Tensor>& state) {
  opt.state().erase(Key(p));
  if (state.empty()) return;
  switch (kind) {
    case OptimizerKind::kSgd: {
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(state.at("momentum_buffer").clone());
      opt.state()[Key(p)] = std::move(s);
      break;
    }
    case OptimizerKind::kAdam:
      opt.state()[Key(p)] = ImportAdamLike<torch::optim::AdamParamState>(state);
      break;
    case OptimizerKind::kAdamW:
      opt.state()[Key(p)] = ImportAdamLike<torch::optim::AdamWParamState>(state);
      break;
  }
}

int64_t OptimizerStateBytes(torch::optim::Optimizer& opt, OptimizerKind kind) {
  int64_t bytes = 0;
  for (auto& group : opt.param_groups())
    for (const auto& p : group.params())
      for (const auto& [name, t] : ExportParamState(opt, kind, p))
        bytes += t.numel() * static_cast<int64_t>(t.element_size());
  return bytes;
}

}  // namespace dapple
