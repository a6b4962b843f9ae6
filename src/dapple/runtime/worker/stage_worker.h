// The stage worker (docs/design.md section 7): runs one stage replica's lowered instruction list
// with real tensors, one exhaustive switch over the instruction kind, the same lists the
// simulator runs. Records live activation bytes and a per-instruction timeline.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dapple/models/data.h"
#include "dapple/models/model.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/overlapped_allreduce.h"
#include "dapple/runtime/comm/rank_grid.h"
#include "dapple/runtime/comm/tied_parameters.h"
#include "dapple/runtime/optim/grad_clipping.h"
#include "dapple/runtime/optim/sharded_optimizer.h"
#include "dapple/runtime/worker/boundary.h"
#include "dapple/schedule/instruction.h"
#include "dapple/sim/timeline.h"

namespace dapple {

class FaultInjector;

// Live activations (bytes, micro-batches) and their peaks.
struct LiveCount {
  int64_t bytes = 0;
  int mbs = 0;
  int64_t peak_bytes = 0;
  int peak_mbs = 0;
  void Add(int64_t b, int m) {
    bytes += b;
    mbs += m;
    peak_bytes = std::max(peak_bytes, bytes);
    peak_mbs = std::max(peak_mbs, mbs);
  }
};

struct StageWorkerOptions {
  int64_t global_batch = 0;  // GBS: the loss of every slice is scaled by rows / GBS
  int64_t micro_batch = 0;   // m
  bool recompute = false;    // keep only stage inputs; recompute the forward in B
  // The layers (model indices in the stage) that re-compute when not all do (Note
  // [Re-computation per layer] in recompute_segments.cc).
  std::vector<int> recompute_layers;
  int64_t bucket_bytes = 0;  // allreduce bucket size
  // AR's buckets (grouped as cost/grad_buckets) start during the last micro-batch's B.
  bool overlap_allreduce = false;
  std::chrono::milliseconds timeout{60000};
  // Note [Fault injection]: where a test kills this rank; null: nowhere.
  const FaultInjector* faults = nullptr;
  // Parameters shared with other stages (Note [Tied parameters]); null: none.
  TiedParameters* tied = nullptr;
  // --clip-grad-norm: clips every gradient of the rank at STEP (Note [Global gradient
  // clipping]); null: no clipping.
  GradClipper* clip = nullptr;
  // The stage shards its optimizer state (Note [Optimizer sharding]): its buckets are the
  // gradient buckets and STEP is its Step; the optimizer given to the worker is its
  // optimizer(). Null: whole state on every replica.
  ShardedOptimizer* sharded = nullptr;
  // Interleaved plans (chunk_set.h): the virtual stage this worker runs (-1: the rank's
  // stage), and the counts of live activations of all the rank's chunks together.
  int virtual_stage = -1;
  LiveCount* rank_live = nullptr;
};

struct StepResult {
  // Sum over this replica's slices of loss_mean(slice) x rows / GBS (last stage only);
  // the sum over the last stage's replicas is the mean loss of the global batch.
  double loss_part = 0;
  std::vector<TimelineEvent> events;  // start/end in ms on the steady clock
};

// Not thread-safe. Every replica of every stage must run RunStep for the same steps in
// the same order; the pairing of sends and receives comes from the lowered lists.
class StageWorker {
 public:
  // `model` holds layers [first, last] of `stage` (at least), which this worker trains;
  // `input`/`output` describe what the stage receives and sends (boundary.h).
  StageWorker(Model& model, const RankGrid& grid, int rank, std::vector<Instruction> program,
              BoundarySpec input, BoundarySpec output, Communicator& comm,
              torch::optim::Optimizer& optimizer, torch::Device device, int first_layer,
              int last_layer, StageWorkerOptions options);

  // Runs the program once on global batch `step`. `batch` is the global batch on the
  // first stage (inputs) and last stage (targets); ignored elsewhere.
  StepResult RunStep(int64_t step, const Batch& batch);

  // RunStep in parts, for a driver that interleaves several workers' programs (chunk_set.h):
  // BeginStep, then Run for each instruction of program() in order (pc: its index), then
  // EndStep with the events Run appended.
  void BeginStep(int64_t step, const Batch& batch);
  void Run(const Instruction& inst, int pc, std::vector<TimelineEvent>* events);
  StepResult EndStep(std::vector<TimelineEvent> events);
  const std::vector<Instruction>& program() const { return program_; }

  const std::vector<torch::Tensor>& parameters() const { return params_; }
  int peak_live_micro_batches() const { return peak_live_mbs_; }
  int64_t peak_live_bytes() const { return peak_live_bytes_; }

 private:
  // One micro-batch in flight on this stage, from its F to its SG (or B on stage 0).
  struct Slot {
    Activations input;    // stage input; batched floating ones require grad on stages > 0
    Activations output;   // stage output (not on the last stage)
    torch::Tensor loss;   // last stage: the scaled loss
    Activations grad_in;  // gradients w.r.t. the inputs that carry one, to send back
    int64_t live_bytes = 0;
    // Split schedules (zb-h1): every layer's output, kept by F; then, from I to W, the root
    // of each layer's weight gradients and the gradient flowing into it (split_backward.cc).
    std::vector<Activations> layer_outputs;
    std::vector<Activations> w_roots, w_grads;
    // Re-computing stages (recompute_segments.cc): per block, its input (a leaf after the
    // first block) and, for a block that does not re-compute, its output with its graph.
    std::vector<Activations> block_inputs, block_outputs;
  };
  // A run of consecutive layers that all re-compute or all do not.
  struct Block {
    int first = 0, last = 0;
    bool recompute = false;
  };
  void Execute(const Instruction& inst, int pc);
  void Forward(int mb);
  void Backward(int mb);
  void InputGrad(int mb);   // I: split_backward.cc
  void WeightGrad(int mb);  // W: split_backward.cc
  // What I takes gradients with respect to (Note [Splitting the backward at layer outputs]):
  // wrt, the stage inputs first (their indices in input_of), then layer outputs (layer,
  // tensor) in output_of.
  struct SplitTargets {
    std::vector<torch::Tensor> wrt;
    std::vector<int> input_of;
    std::vector<std::pair<int, int>> output_of;
  };
  SplitTargets SplitBackwardTargets(const Slot& s, int n) const;
  void KeepLayerOutputGrads(Slot& s, const SplitTargets& targets,
                            const std::vector<torch::Tensor>& grads);
  void StoreInputGrads(Slot& s, const std::vector<int>& input_of,
                       const std::vector<torch::Tensor>& grads);
  void SendActivation(int mb);
  void SendGradient(int mb);
  void PostRecv(const Instruction& inst);
  void WaitRecv(const Instruction& inst);
  void PostNextRecv(int pc, Op op);
  Activations RunLayers(Activations x, int64_t* saved_bytes);
  // recompute_segments.cc: the blocks, and F, B and I of a stage with blocks that re-compute.
  std::vector<Block> MakeBlocks() const;
  Activations RunBlock(Activations x, const Block& b, int64_t* saved_bytes,
                       std::vector<Activations>* layer_outputs);
  Activations ForwardBlocks(Slot& s);
  void BackwardBlocks(Slot& s, int mb);
  // The roots of block b's backward and their gradients: the loss, or the stage's outputs
  // with the received gradients, on the last block; else its outputs y with `above`, the
  // gradients with respect to the next block's input.
  void BlockRoots(Slot& s, int b, int mb, const Activations& y, const Activations& received,
                  const Activations& above, Activations& roots, Activations& grads);
  Activations RebuildBlock(Slot& s, int b, std::vector<Activations>* layer_outputs);
  void InputGradBlocks(Slot& s, int mb);
  void InputGradBlock(Slot& s, int b, Activations roots, Activations root_grads,
                      Activations* input_grads);
  torch::Tensor ScaledLoss(const Activations& out, int mb);
  // The stage's output tensors that carry a gradient, and the received gradients for them.
  void OutputRoots(const Activations& out, const Activations& received, Activations& roots,
                   Activations& grads) const;
  // The received pieces of (op, mb), concatenated by rows (Note [Boundary tensors]).
  Activations TakeReceived(Op op, int mb);
  // "rank 2 (stage 1, replica 0), step 3, micro-batch 4: waiting on RA4 from rank 0"
  std::string Where(int mb, const std::string& what) const;
  void AddLive(int64_t bytes, int mbs);

  Model& model_;
  const RankGrid& grid_;
  int rank_;
  int stage_, replica_;
  std::vector<Instruction> program_;
  BoundarySpec in_spec_, out_spec_;
  std::vector<bool> in_all_, out_all_;    // every tensor (activations)
  std::vector<bool> in_grad_, out_grad_;  // the tensors whose gradient travels back
  Communicator& comm_;
  torch::optim::Optimizer& optimizer_;
  torch::Device device_;
  int first_, last_;
  StageWorkerOptions opt_;
  std::vector<torch::Tensor> params_;
  SampleRange my_rows_;                                // my slice of every micro-batch
  std::vector<TransferPiece> in_pieces_, out_pieces_;  // boundary before / after my stage
  std::unique_ptr<OverlappedAllReduce> own_buckets_;   // unless the optimizer is sharded
  OverlappedAllReduce* grad_buckets_ = nullptr;        // the gradient buckets; null: no AR
  int last_backward_pc_ = -1;                          // the B or W that grad_buckets_ is armed for
  bool split_ = false;                        // the program has I and W (keep every layer's output)
  std::vector<Block> blocks_;                 // one without re-computation
  bool recomputes_ = false;                   // some block re-computes
  std::vector<Activations> kept_outputs_;     // RunLayers' layer outputs when split_
  std::vector<TimelineEvent> bucket_events_;  // this step's "AR b<k>"
  std::vector<TimelineEvent> norm_events_;    // this step's "NORM" and "AG" (inside its STEP)

  // Per-step state.
  int64_t step_ = 0;
  const Batch* batch_ = nullptr;
  double loss_part_ = 0;
  std::map<int, Slot> slots_;
  std::map<std::pair<Op, int>, std::vector<CommWork>> recvs_;  // posted receives
  std::map<std::pair<Op, int>, std::vector<CommWork>> sends_;  // not known complete
  int64_t live_bytes_ = 0;
  int live_mbs_ = 0;
  int peak_live_mbs_ = 0;
  int64_t peak_live_bytes_ = 0;
};

}  // namespace dapple
