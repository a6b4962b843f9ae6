// Optimizer sharding across a stage's replicas (ZeRO stage 1; Megatron's distributed
// optimizer): each replica holds and updates 1/r of the stage's optimizer state.
//
// Note [Optimizer sharding]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A stage whose plan says `shard_optimizer` splits each flat gradient buffer of its buckets
// (Note [Gradients are bucket views], overlapped_allreduce.h; padded with zeros to a multiple
// of r) into r equal contiguous shards; replica k owns shard k of every buffer.
// - Reduce-scatter. Built as Gloo's alltoall of the buffer (replica j receives part j from
//   every replica) and a local sum of the r received parts in replica order: each replica
//   sends (r-1)/r of the buffer, what a ring reduce-scatter sends and half of a ring
//   allreduce. An allreduce and a slice would send twice that, and r reduces (one to each
//   shard's owner) are r collectives per bucket. PyTorch 2's Gloo reduce-scatter measured
//   1.25-3.25x slower (scripts/bench_reduce_scatter.py, docs/pytorch.md). Its price is a
//   receive buffer as large as the bucket from its launch to the end of AR. The buckets start as
//   the allreduce's did, overlapped with the last backward (events "RS b<k>").
// - Step. Each part's parameters become views of one flat parameter buffer laid out as its
//   gradient buffer; the optimizer (torch::optim, unchanged) holds shard k of each parameter
//   buffer, with shard k of the reduced gradients as its .grad, plus the parameters outside
//   the buckets (tied ones, reduced on their own: Note [Tied parameters]) whole. SGD with
//   momentum, Adam and AdamW update element by element, so stepping a shard of the
//   concatenation steps exactly those elements of the parameters, with 1/r of the state.
//   With weight decay on matrices only, buckets keep matrices and the rest in separate
//   parts, and a matrix part's shard is shaped 1 x n so that MakeOptimizer's rule (2 or more
//   dimensions: decayed) groups it as its parameters.
// - All-gather. A ring of sends and receives inside the stage's group ((r-1)/r of the
//   buffer per replica) brings every replica's updated shard into every replica's parameter
//   buffer, in place, after the step and before the next forward (event "AG" inside STEP).
//   Gloo's own allgather would hold a flat copy of its output while it runs (a part's bytes
//   more). Reduce-scatter plus all-gather send the bytes of one ring allreduce. So the
//   saving in resident memory, 1 - 1/r of the state, is less the receive buffers of the
//   reduce-scatter: up to the stage's gradient bytes at the end of the last backward, which
//   the cost model charges (ShardedStaticMemoryBytes).
// - Clipping: each replica counts the norm of its shards' reduced gradients, replica 0 that
//   of the parameters outside the buckets (GradClipper::UseShards).
// - Checkpoints hold each parameter's whole state, so they do not depend on the plan: Export
//   assembles a parameter's state from the shards (a sum over the replicas of the pieces each
//   holds, zeros elsewhere: exact), Import takes this replica's piece of it.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dapple/models/model.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/overlapped_allreduce.h"
#include "dapple/runtime/comm/tied_parameters.h"
#include "dapple/runtime/optim/optimizer.h"

namespace dapple {

// The parameters a stage's gradient buckets hold, per layer of [first, last]: each once,
// without those of `tied` (null: none), which have their own allreduce.
std::vector<std::vector<torch::Tensor>> BucketedLayerParams(const Model& model, int first, int last,
                                                            const TiedParameters* tied);

class ShardedOptimizer final : public ParamStateStore {
 public:
  // Replica `replica` of `replicas` (>= 2) in process group `group` (the stage's). Builds the
  // stage's sharded gradient buckets over `layer_params` (BucketedLayerParams of layers
  // first..) with cap `bucket_bytes`, and the optimizer over this replica's shards and the
  // parameters of `all_params` outside the buckets. Not collective.
  ShardedOptimizer(const OptimizerOptions& options, Communicator& comm, std::string group,
                   int replica, int replicas, std::vector<std::vector<torch::Tensor>> layer_params,
                   int first, int64_t bucket_bytes, const std::vector<torch::Tensor>& all_params);

  OverlappedAllReduce& buckets() { return *buckets_; }
  // What the learning rate is set on and the state bytes are counted in.
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  // This replica's shards (their .grad: the reduced gradient shards, after AR).
  const std::vector<torch::Tensor>& shards() const { return shards_; }
  // The parameters whose state is sharded.
  std::vector<torch::Tensor> ShardedParameters() const;

  // After AR: steps the shards and the other parameters, all-gathers the parameters
  // (collective over the stage's replicas; `what` prefixes a failure, one `timeout`) and
  // zeroes every gradient in place. Returns the all-gather's start and end (ms).
  std::pair<double, double> Step(const std::string& what, std::chrono::milliseconds timeout);

  // ParamStateStore. Export of a sharded parameter is collective over the stage's replicas:
  // every replica exports the same parameters in the same order.
  OptimizerKind kind() const override { return kind_; }
  std::map<std::string, torch::Tensor> Export(const torch::Tensor& p) override;
  void Import(const torch::Tensor& p, const std::map<std::string, torch::Tensor>& state) override;

 private:
  struct Place {  // of a sharded parameter
    int part = 0;
    int64_t offset = 0;  // in the part's buffers
  };
  // The overlap of [offset, offset + numel) with this replica's shard of `part`, as
  // (start in the parameter, start in the shard, length); length 0: none.
  std::tuple<int64_t, int64_t, int64_t> Overlap(const Place& at, int64_t numel) const;

  Communicator& comm_;
  std::string group_;
  int replica_, replicas_;
  OptimizerKind kind_;
  std::unique_ptr<OverlappedAllReduce> buckets_;
  std::vector<GradPart> parts_;
  std::vector<torch::Tensor> param_flats_;  // per part: the parameters' flat buffer
  std::vector<torch::Tensor> shards_;       // per part: shard replica_ of param_flats_
  std::map<const void*, Place> places_;     // by TensorImpl
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace dapple
