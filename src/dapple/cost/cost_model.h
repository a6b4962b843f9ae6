// The cost model of docs/design.md section 4 behind one interface, so tests can inject a fake.
// Every time is in milliseconds, every size in bytes, per device.
#pragma once

#include <span>
#include <vector>

namespace dapple {

class EmulationCosts;

// One split-concat transfer: its duration and the shared resources (links, server ports)
// it holds exclusively while it runs. Resource ids are opaque small integers.
struct TransferCost {
  double ms = 0;
  std::vector<int> resources;
};

class CostModel {
 public:
  virtual ~CostModel() = default;

  virtual int num_layers() const = 0;
  virtual int num_devices() const = 0;
  // The profile batch size the layer times refer to.
  virtual int profile_batch_size() const = 0;

  // Forward / backward time of layers [first, last] on `device` for `samples` samples
  // (one replica's slice of a micro-batch).
  virtual double ForwardMs(int first, int last, double samples, int device) const = 0;
  virtual double BackwardMs(int first, int last, double samples, int device) const = 0;
  // The backward's two parts as the split schedules (zb-h1) run them: I, the gradient with
  // respect to the stage input (keeping the graph), and W, the weight gradients. By default
  // half of BackwardMs each (a matrix product's two gradients cost the same); the analytic
  // model uses the profile's measured split, or its default share (cost/analytic_cost_model.h).
  virtual double BackwardInputMs(int first, int last, double samples, int device) const {
    return BackwardMs(first, last, samples, device) / 2;
  }
  virtual double BackwardWeightMs(int first, int last, double samples, int device) const {
    return BackwardMs(first, last, samples, device) / 2;
  }

  // Bytes crossing the boundary after layer `last` for `samples` samples (the gradient sent
  // back has the same size).
  virtual double CutBytes(int last, double samples) const = 0;

  // Split-concat transfer of one micro-batch of `micro_batch` samples across the boundary
  // after layer `last`, from the replicas `from` (device ids, replica j owns the j-th
  // contiguous slice) to the replicas `to`. Same cost for the gradient going back.
  virtual TransferCost Transfer(int last, double micro_batch, const std::vector<int>& from,
                                const std::vector<int>& to) const = 0;
  // Whether every transfer that takes time holds at least one resource (Transfer(...).resources
  // not empty), so that the simulator runs the transfers of one stage boundary one after
  // another: the planner's lower bounds may then count a boundary's micro-batches in turn.
  virtual bool TransfersHoldLinks() const { return false; }
  // Transfer(...).ms alone: the planners' inner loops need no link resources, and a model
  // may answer without building them.
  virtual double TransferMs(int last, double micro_batch, const std::vector<int>& from,
                            const std::vector<int>& to) const {
    return Transfer(last, micro_batch, from, to).ms;
  }

  // TransferMs(lasts[j], micro_batch, from, to) into out[j] for every j (out holds
  // lasts.size()): the DAPPLE DP asks one pair of device lists at many boundaries. A model
  // may answer them at once; the figures are TransferMs's to the last bit.
  virtual void TransferMsAt(std::span<const int> lasts, double micro_batch,
                            const std::vector<int>& from, const std::vector<int>& to,
                            double* out) const {
    for (size_t j = 0; j < lasts.size(); ++j) out[j] = TransferMs(lasts[j], micro_batch, from, to);
  }

  // One optimizer update of the parameters of layers [first, last] on `device` (the STEP
  // that ends an iteration): the profile's update_ms summed over the layers, divided by
  // the device's speed. Independent of the batch size.
  virtual double UpdateMs(int first, int last, int device) const = 0;

  // Ring allreduce of the parameters of layers [first, last] among `devices` (0 if one).
  virtual double AllReduceMs(int first, int last, const std::vector<int>& devices) const = 0;

  // Optimizer sharding (ZeRO stage 1, Note [Optimizer sharding] in the runtime's
  // sharded_optimizer.h): the reduce-scatter of the gradients of [first, last] among
  // `devices` and the all-gather of their parameters each send (r-1)/r of the bytes per
  // device, half of what a ring allreduce sends: half of AllReduceMs each. 0 if one device.
  double ReduceScatterMs(int first, int last, const std::vector<int>& devices) const {
    return AllReduceMs(first, last, devices) / 2;
  }
  double AllGatherMs(int first, int last, const std::vector<int>& devices) const {
    return AllReduceMs(first, last, devices) / 2;
  }

  // Ring allreduce of one 8-byte number among `devices` (0 if one): the global gradient
  // norm of a clipped step. 0 in models without links.
  virtual double ScalarAllReduceMs(const std::vector<int>& /*devices*/) const { return 0; }

  // AllReduceMs(firsts[j], last, devices) into out[j] for every j (out holds firsts.size()):
  // the DAPPLE DP and PipeDream's ask one stage's devices at every first layer of a block in
  // a row. A model may answer them at once; the figures are AllReduceMs's to the last bit.
  virtual void AllReduceMsFrom(std::span<const int> firsts, int last,
                               const std::vector<int>& devices, double* out) const {
    for (size_t j = 0; j < firsts.size(); ++j) out[j] = AllReduceMs(firsts[j], last, devices);
  }

  // Parameter bytes of layers [first, last] (what allreducing their gradients moves).
  virtual double ParameterBytes(int first, int last) const = 0;
  // Largest gradient bucket of an allreduce overlapped with the backward, in parameter
  // bytes (GradientBuckets in cost/grad_buckets.h).
  virtual double AllReduceBucketBytes() const = 0;

  // Per device of a stage [first, last]: parameters x state factor (weights, gradients,
  // optimizer state), and the training data it holds (Note [Data in the memory figure] in
  // format/profile.h).
  virtual double StaticMemoryBytes(int first, int last) const = 0;
  // The same on each of `replicas` devices that shard the optimizer state: weights and
  // gradients whole, the state beyond them 1/replicas. By default no saving.
  virtual double ShardedStaticMemoryBytes(int first, int last, int /*replicas*/) const {
    return StaticMemoryBytes(first, last);
  }
  // The outputs of layers first..last that one micro-batch slice of `samples` samples keeps
  // alive for the backward.
  virtual double ActivationBytes(int first, int last, double samples) const = 0;
  // The input of a stage that starts at `first`, `samples` samples of it: what crosses into
  // layer `first` (the model input for layer 0). A micro-batch holds it beside its layers'
  // outputs until its backward (RecomputeBytes in cost/recompute_costs.h).
  virtual double StageInputBytes(int first, double samples) const = 0;

  // What a stage may use on `device`: its memory less the training process's own
  // (ProcessMemoryBytes). Every memory check of the planners and the simulator compares a
  // stage's static memory plus activations with this (Note [Process memory] in
  // format/cluster.h).
  virtual double DeviceMemoryBytes(int device) const = 0;
  // What a training process holds on `device` beside its stage (DeviceSpec's
  // process_memory_bytes); 0 unless the cluster says.
  virtual double ProcessMemoryBytes(int /*device*/) const { return 0; }
  // Devices of one kind cost the same: equal ForwardMs, BackwardMs (and its parts),
  // UpdateMs, DeviceMemoryBytes and ProcessMemoryBytes for equal arguments. So the
  // planners may evaluate one replica per kind and slice size. By default every device is
  // a kind of its own.
  virtual int DeviceKind(int device) const { return device; }

  // Devices that are processes sharing one machine's cores: what the simulator charges for
  // it (Note [Emulated devices] in format/cluster.h); null for devices of their own.
  virtual const EmulationCosts* Emulation() const { return nullptr; }

  // Time of one iteration of `global_batch` samples on one device of speed 1, no
  // communication: GBS/PBS x sum over layers of (fwd + bwd). The speedup's numerator.
  virtual double SingleDeviceMs(int global_batch) const = 0;
};

}  // namespace dapple
