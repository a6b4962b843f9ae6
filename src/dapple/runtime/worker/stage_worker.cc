// StageWorker: interprets one stage replica's lowered instruction list; its messages are in
// stage_worker_messages.cc.
#include "dapple/runtime/worker/stage_worker.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/autograd.h>

#include <set>

#include "dapple/common/clock.h"
#include "dapple/common/error.h"
#include "dapple/models/mixed_precision.h"
#include "dapple/runtime/worker/fault_injector.h"

namespace dapple {
namespace {

const char* Category(Op op) {
  switch (op) {
    case Op::kForward:
      return "forward";
    case Op::kBackward:
    case Op::kInputGrad:
      return "backward";
    case Op::kWeightGrad:
      return "weight";
    case Op::kSendAct:
    case Op::kRecvAct:
    case Op::kSendGrad:
    case Op::kRecvGrad:
      return "transfer";
    case Op::kAllReduceGrads:
      return "allreduce";
    case Op::kOptimizerStep:
      return "step";
  }
  return "?";
}

// Which tensors of `spec` a gradient message holds: those that carry a gradient, or the
// first when none does (its message then holds zeros, so the lists stay paired).
std::vector<bool> GradientSelect(const BoundarySpec& spec) {
  std::vector<bool> select;
  bool any = false;
  for (const auto& t : spec) {
    select.push_back(t.CarriesGradient());
    any = any || select.back();
  }
  if (!any && !select.empty()) select[0] = true;
  return select;
}

}  // namespace

StageWorker::StageWorker(Model& model, const RankGrid& grid, int rank,
                         std::vector<Instruction> program, BoundarySpec input, BoundarySpec output,
                         Communicator& comm, torch::optim::Optimizer& optimizer,
                         torch::Device device, int first_layer, int last_layer,
                         StageWorkerOptions options)
    : model_(model),
      grid_(grid),
      rank_(rank),
      stage_(options.virtual_stage >= 0 ? options.virtual_stage : grid.Of(rank).stage),
      replica_(grid.Of(rank).replica),
      program_(std::move(program)),
      in_spec_(std::move(input)),
      out_spec_(std::move(output)),
      in_all_(in_spec_.size(), true),
      out_all_(out_spec_.size(), true),
      in_grad_(GradientSelect(in_spec_)),
      out_grad_(GradientSelect(out_spec_)),
      comm_(comm),
      optimizer_(optimizer),
      device_(device),
      first_(first_layer),
      last_(last_layer),
      opt_(options) {
  params_ = model.Parameters(first_, last_);
  my_rows_ = grid.SliceRows(stage_, replica_, opt_.micro_batch);
  DAPPLE_CHECK(my_rows_.size() > 0, "empty replica slice");
  if (stage_ > 0) {
    for (const auto& p : grid.Pieces(stage_ - 1, opt_.micro_batch))
      if (p.receiver_replica == replica_) in_pieces_.push_back(p);
  }
  if (stage_ + 1 < grid.num_virtual_stages()) {
    for (const auto& p : grid.Pieces(stage_, opt_.micro_batch))
      if (p.sender_replica == replica_) out_pieces_.push_back(p);
  }
  bool has_ar = false;
  for (int pc = 0; pc < static_cast<int>(program_.size()); ++pc) {
    if (program_[pc].op == Op::kBackward || program_[pc].op == Op::kWeightGrad)
      last_backward_pc_ = pc;
    split_ = split_ || program_[pc].op == Op::kInputGrad;
    if (program_[pc].op == Op::kAllReduceGrads) has_ar = true;
  }
  blocks_ = MakeBlocks();
  recomputes_ =
      std::any_of(blocks_.begin(), blocks_.end(), [](const Block& b) { return b.recompute; });
  // Both with and without overlap the gradients live in the buckets (Note [Gradients are
  // bucket views] in overlapped_allreduce.h): without overlap, AR launches every bucket.
  if (has_ar && opt_.sharded) {
    grad_buckets_ = &opt_.sharded->buckets();
  } else if (has_ar) {
    // Each parameter once; tied ones have their own allreduce (Note [Tied parameters]).
    own_buckets_ = std::make_unique<OverlappedAllReduce>(
        comm_, fmt::format("stage{}", stage_), BucketedLayerParams(model, first_, last_, opt_.tied),
        first_, opt_.bucket_bytes);
    grad_buckets_ = own_buckets_.get();
  }
}

std::string StageWorker::Where(int mb, const std::string& what) const {
  std::string who = grid_.Describe(rank_);
  if (grid_.num_chunks() > 1) who += fmt::format(" chunk {}", stage_ / grid_.num_stages());
  if (mb < 0) return fmt::format("{}, step {}: {}", who, step_, what);
  return fmt::format("{}, step {}, micro-batch {}: waiting on {}", who, step_, mb, what);
}

void StageWorker::AddLive(int64_t bytes, int mbs) {
  if (opt_.rank_live) opt_.rank_live->Add(bytes, mbs);
  live_bytes_ += bytes;
  live_mbs_ += mbs;
  peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
  peak_live_mbs_ = std::max(peak_live_mbs_, live_mbs_);
}

StepResult StageWorker::RunStep(int64_t step, const Batch& batch) {
  BeginStep(step, batch);
  std::vector<TimelineEvent> events;
  for (int pc = 0; pc < static_cast<int>(program_.size()); ++pc) {
    const Instruction& inst = program_[pc];
    if (opt_.faults)
      opt_.faults->MidStep(step, pc, program_.size(), grid_.Describe(rank_), ToString(inst));
    Run(inst, pc, &events);
  }
  return EndStep(std::move(events));
}

void StageWorker::BeginStep(int64_t step, const Batch& batch) {
  step_ = step;
  batch_ = &batch;
  loss_part_ = 0;
  slots_.clear();
  recvs_.clear();
  bucket_events_.clear();
  norm_events_.clear();
}

void StageWorker::Run(const Instruction& inst, int pc, std::vector<TimelineEvent>* events) {
  DAPPLE_CHECK(pc < static_cast<int>(program_.size()) && program_[pc] == inst);
  double start = NowMs();
  Execute(inst, pc);
  events->push_back(
      {rank_, ToString(inst), Category(inst.op), start, NowMs(), stage_, inst.micro_batch});
}

StepResult StageWorker::EndStep(std::vector<TimelineEvent> events) {
  StepResult result;
  result.events = std::move(events);
  const Deadline sends_deadline(opt_.timeout);  // Note [One deadline per wait chain]
  for (auto& [key, works] : sends_)
    for (auto& w : works) w.Wait(sends_deadline);
  sends_.clear();
  DAPPLE_CHECK(slots_.empty() && recvs_.empty(), "micro-batches left over after the step");
  DAPPLE_CHECK(live_mbs_ == 0);
  result.events.insert(result.events.end(), bucket_events_.begin(), bucket_events_.end());
  result.events.insert(result.events.end(), norm_events_.begin(), norm_events_.end());
  result.loss_part = loss_part_;
  ClearCastCache();  // the update changed the weights (Note [Mixed precision])
  return result;
}

void StageWorker::Execute(const Instruction& inst, int pc) {
  // Note: exhaustive, no default (-Werror=switch): a new Op must be handled here.
  switch (inst.op) {
    case Op::kForward:
      Forward(inst.micro_batch);
      return;
    case Op::kBackward:
      if (grad_buckets_ && opt_.overlap_allreduce && pc == last_backward_pc_)
        grad_buckets_->Arm(Where(-1, "AR (overlapped allreduce among the stage's replicas)"));
      Backward(inst.micro_batch);
      return;
    case Op::kInputGrad:
      InputGrad(inst.micro_batch);
      return;
    case Op::kWeightGrad:
      if (grad_buckets_ && opt_.overlap_allreduce && pc == last_backward_pc_)
        grad_buckets_->Arm(Where(-1, "AR (overlapped allreduce among the stage's replicas)"));
      WeightGrad(inst.micro_batch);
      return;
    case Op::kSendAct:
      SendActivation(inst.micro_batch);
      return;
    case Op::kRecvAct:
      WaitRecv(inst);
      PostNextRecv(pc, Op::kRecvAct);
      return;
    case Op::kSendGrad:
      SendGradient(inst.micro_batch);
      return;
    case Op::kRecvGrad: {
      WaitRecv(inst);
      // Every receiver of SA(mb) has sent its gradient, so those sends are complete.
      auto it = sends_.find({Op::kSendAct, inst.micro_batch});
      if (it != sends_.end()) {
        for (auto& w : it->second) w.Wait(opt_.timeout);
        sends_.erase(it);
      }
      PostNextRecv(pc, Op::kRecvGrad);
      return;
    }
    case Op::kAllReduceGrads:
      DAPPLE_CHECK(grad_buckets_ != nullptr);
      if (opt_.overlap_allreduce) {
        bucket_events_ = grad_buckets_->Finish(opt_.timeout, rank_, stage_);
      } else {  // the buckets run inside AR: no events of their own
        grad_buckets_->Arm(Where(-1, "AR (allreduce among the stage's replicas)"));
        grad_buckets_->Finish(opt_.timeout, rank_, stage_);
      }
      return;
    case Op::kOptimizerStep:
      if (opt_.tied) opt_.tied->AllReduceGradients(Where(-1, "allreduce of tied parameters"));
      if (opt_.clip) {  // as the simulator's NORM (Note [Global gradient clipping])
        const double start = NowMs();
        opt_.clip->Clip(Where(-1, "allreduce of the gradient norm"));
        norm_events_.push_back({rank_, "NORM", "allreduce", start, NowMs(), stage_, -1});
      }
      if (opt_.sharded) {  // the step, then the all-gather (Note [Optimizer sharding])
        auto [start, end] = opt_.sharded->Step(
            Where(-1, "AG (all-gather of the sharded parameters)"), opt_.timeout);
        norm_events_.push_back({rank_, "AG", "allreduce", start, end, stage_, -1});
        return;
      }
      optimizer_.step();
      optimizer_.zero_grad(/*set_to_none=*/false);  // in place: grads are bucket views
      return;
  }
  DAPPLE_CHECK(false, "unknown instruction");
}

Activations StageWorker::RunLayers(Activations x, int64_t* saved_bytes) {
  *saved_bytes = Bytes(x);  // the input as received (Note [Mixed precision]: bf16 kept)
  x = FromWire(std::move(x), in_spec_, in_all_);
  for (int l = first_; l <= last_; ++l) {
    x = model_.ForwardActivations(x, l, l);
    *saved_bytes += Bytes(x);
    if (split_) kept_outputs_.push_back(x);
  }
  return x;
}

void StageWorker::Forward(int mb) {
  Slot& s = slots_[mb];
  const int64_t n = my_rows_.size();
  if (stage_ == 0) {
    int64_t begin = mb * opt_.micro_batch + my_rows_.begin;
    s.input = {batch_->inputs.narrow(0, begin, n).to(device_)};
  } else {
    s.input = TakeReceived(Op::kRecvAct, mb);
    for (size_t i = 0; i < s.input.size(); ++i)
      if (in_spec_[i].CarriesGradient()) s.input[i].requires_grad_(true);
  }
  Activations out;
  if (recomputes_) {  // Note [Re-computation per layer] (recompute_segments.cc)
    out = ForwardBlocks(s);
  } else {
    int64_t saved = 0;
    out = RunLayers(s.input, &saved);
    s.live_bytes = saved;
    s.layer_outputs = std::move(kept_outputs_);
    kept_outputs_.clear();
  }
  if (stage_ + 1 == grid_.num_virtual_stages()) {
    int64_t begin = mb * opt_.micro_batch + my_rows_.begin;
    torch::Tensor target = batch_->targets.narrow(0, begin, n).to(device_);
    torch::Tensor loss = model_.loss(out.at(0), target);
    double scale = static_cast<double>(n) / static_cast<double>(opt_.global_batch);
    loss_part_ += loss.item<double>() * scale;
    s.loss = loss * scale;
  } else {
    for (size_t i = 0; i < out.size(); ++i) {
      if (!out_spec_.at(i).batched && out[i].requires_grad()) {
        ThrowInput(
            "model {}: layer {} returns tensor {} that is not split by the batch and depends on "
            "trained parameters; dapple sends no gradient for it (Note [Boundary tensors])",
            model_.name, model_.layers[last_].name, i);
      }
    }
    s.output = out;
  }
  AddLive(s.live_bytes, 1);
}

void StageWorker::Backward(int mb) {
  auto it = slots_.find(mb);
  DAPPLE_CHECK(it != slots_.end(), "B before its F");
  Slot& s = it->second;
  const bool last = stage_ + 1 == grid_.num_virtual_stages();
  if (recomputes_) {  // Note [Re-computation per layer] (recompute_segments.cc)
    BackwardBlocks(s, mb);
  } else if (last) {
    s.loss.backward();
  } else {
    Activations grads = TakeReceived(Op::kRecvGrad, mb), outs, out_grads;
    OutputRoots(s.output, grads, outs, out_grads);
    if (!outs.empty()) torch::autograd::backward(outs, out_grads);
  }
  if (stage_ > 0) {
    s.grad_in.clear();
    for (size_t i = 0; i < s.input.size(); ++i) {
      if (!in_grad_[i]) continue;
      torch::Tensor g = s.input[i].grad();
      s.grad_in.push_back(g.defined() ? g : torch::zeros_like(s.input[i]));
    }
  }
  AddLive(-s.live_bytes, -1);
  s.input.clear();
  s.output.clear();
  s.block_inputs.clear();
  s.block_outputs.clear();
  s.loss = torch::Tensor();
  if (stage_ == 0) slots_.erase(it);
}

}  // namespace dapple
