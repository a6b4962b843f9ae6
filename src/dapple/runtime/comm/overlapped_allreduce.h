// The gradient allreduce overlapped with the last micro-batch's backward (docs/runtime.md,
// "Allreduce overlap"): DDP-style buckets grouped exactly as the simulator groups them
// (cost/grad_buckets.h), each launched asynchronously once all its gradients are final.
#pragma once

#include <torch/csrc/autograd/function.h>
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dapple/cost/grad_buckets.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/sim/timeline.h"

namespace dapple {

// How a stage's replicas split the reduced gradients (Note [Optimizer sharding],
// sharded_optimizer.h): `count` shards, this replica's is `index`; count 1: none. With
// `split_matrices`, a bucket keeps parameters of 2 or more dimensions and the others in
// separate parts (weight decay on matrices only), so that each shard of a part is all
// decayed or all plain.
struct GradShards {
  int count = 1;
  int index = 0;
  bool split_matrices = false;
};

// One flat gradient buffer (a dtype of a bucket) as the sharded optimizer sees it.
struct GradPart {
  torch::Tensor flat;                 // numel a multiple of the shard count (zero padding)
  std::vector<torch::Tensor> params;  // whose .grad are views of `flat`
  std::vector<int64_t> offset;        // of each in `flat`
  bool matrices = false;              // with GradShards::split_matrices: all have dim >= 2
};

// Not thread-safe beyond what autograd does: the hooks run on the thread that runs the
// backward. Every replica of the stage must drive it identically (same model, same calls).
class OverlappedAllReduce {
 public:
  // layer_params[i]: the parameters of layer first + i. Buckets come from
  // GroupGradientBuckets on each layer's parameter bytes with cap `bucket_bytes`.
  OverlappedAllReduce(Communicator& comm, std::string group,
                      std::vector<std::vector<torch::Tensor>> layer_params, int first,
                      int64_t bucket_bytes, GradShards shards = {});
  ~OverlappedAllReduce();
  OverlappedAllReduce(const OverlappedAllReduce&) = delete;
  OverlappedAllReduce& operator=(const OverlappedAllReduce&) = delete;

  // Note [Gradients are bucket views]: from construction on, every parameter's .grad aliases
  // its slot in its bucket's flat buffer (as DDP's gradient_as_bucket_view), so autograd
  // accumulates straight into the buffer and no gradient is ever copied. Whoever zeroes
  // the gradients must do it in place (Optimizer::zero_grad(false); PyTorch 2's default
  // drops them), never reassign .grad.

  // Watches the next backward (the last micro-batch's): when a parameter's gradient has
  // been accumulated, and a bucket's parameters all have, the bucket is allreduced
  // asynchronously, in bucket order (bucket 0 holds the stage's last layer), so every
  // replica starts the collectives in the same order. Sharded, a bucket is reduce-scattered
  // instead (an alltoall, then the sum of the received parts into this replica's shard). `what`
  // prefixes failures
  // ("rank 1 (stage 0, ...)").
  void Arm(const std::string& what);

  // Disarms, starts the buckets still waiting (a parameter the backward did not reach
  // contributes its accumulated gradient, or zeros), waits for all buckets together
  // within one `timeout` (Note [One deadline per wait chain]; a failure names the bucket); the
  // gradients then hold the sums. Returns one "AR b<k>" event per bucket on `track`: from its
  // launch to when its wait returned (an upper bound of its end). Returns the bytes reduced via
  // *bytes if given.
  std::vector<TimelineEvent> Finish(std::chrono::milliseconds timeout, int track, int stage,
                                    int64_t* bytes = nullptr);

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  // Every part of every bucket, in bucket order.
  std::vector<GradPart> Parts() const;
  const GradShards& shards() const { return shards_; }

 private:
  struct Part {                   // one dtype of one bucket: a flat buffer of its gradients
    std::vector<int> params;      // indices into params_
    std::vector<int64_t> offset;  // of each in `flat`
    torch::Tensor flat;
    torch::Tensor received;  // sharded: what the alltoall brought, until Finish sums it
    bool matrices = false;
    CommWork work;
  };
  struct Bucket {
    std::vector<Part> parts;
    int waiting = 0;  // parameters whose gradient has not arrived
    bool launched = false;
    double launch_ms = 0;
  };
  void Arrived(int param);
  void LaunchReady();
  void Launch(int b);
  void RemoveHooks();
  void SumReceived(Part& part);

  Communicator& comm_;
  std::string group_;
  GradShards shards_;
  std::vector<GradBucket> buckets_;
  std::vector<torch::Tensor> params_;
  std::vector<int> bucket_of_;                // per parameter
  std::vector<std::pair<int, int>> slot_of_;  // per parameter: (part, index in part)
  std::vector<Bucket> state_;
  // Per parameter: its AccumulateGrad node (kept alive: the parameter holds it weakly)
  // and the key of the post hook installed on it.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hooks_;
  std::vector<bool> arrived_;
  bool armed_ = false;
  int next_launch_ = 0;
  std::string what_;
};

}  // namespace dapple
