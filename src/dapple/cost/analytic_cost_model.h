// The reference cost model of docs/design.md section 4, from a profile and a cluster.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/cost/emulation_costs.h"
#include "dapple/format/cluster.h"
#include "dapple/format/profile.h"

namespace dapple {

struct CostOptions {
  // Bytes of state per parameter byte: weights, gradients and two Adam moments in fp32.
  double state_factor = 4.0;
  // Override of every device's memory (bytes); <= 0 keeps the cluster's.
  double memory_bytes_override = 0;
  // Gradient bucket of the allreduce overlapped with the backward: 25 MiB of parameters,
  // PyTorch DDP's bucket_cap_mb default and the runtime's (`dapple train --bucket-mb`).
  double allreduce_bucket_bytes = 25 << 20;
  // For layers whose profile lacks backward_input_ms / backward_weight_ms (PipeDream and
  // DAPPLE text, older JSON): the share of backward_ms taken as the weight gradients W
  // when the layer has parameters (0 without parameters); the rest is the input gradient
  // I. `--weight-grad-share`; how well 0.5 matched measured models: docs/schedules.md.
  double weight_grad_share = 0.5;
};

// Bytes of computing copies per float32 parameter byte: 0.5 for bf16 (its weights' bf16
// copies), 0 for float32 (Note [Mixed precision]).
double WeightCopyFactor(Precision p);

// Keeps references to `profile` and `cluster`: both must outlive it. Stage sums are O(1)
// (prefix sums), so the planner can call it in its inner loop; after construction every
// method only reads, so threads may share one model. Link resource ids of Transfer: 2s is
// server s's egress port, 2s+1 its ingress port, 2 x num_servers + d device d's own
// intra-server (receive) link.
class AnalyticCostModel : public CostModel {
 public:
  AnalyticCostModel(const Profile& profile, const Cluster& cluster, CostOptions options = {});
  // The model keeps references to the profile and the cluster: a temporary would dangle.
  AnalyticCostModel(Profile&&, const Cluster&, CostOptions = {}) = delete;
  AnalyticCostModel(const Profile&, Cluster&&, CostOptions = {}) = delete;
  AnalyticCostModel(Profile&&, Cluster&&, CostOptions = {}) = delete;

  int num_layers() const override;
  int num_devices() const override;
  int profile_batch_size() const override;
  double ForwardMs(int first, int last, double samples, int device) const override;
  double BackwardMs(int first, int last, double samples, int device) const override;
  double BackwardInputMs(int first, int last, double samples, int device) const override;
  double BackwardWeightMs(int first, int last, double samples, int device) const override;
  double CutBytes(int last, double samples) const override;
  TransferCost Transfer(int last, double micro_batch, const std::vector<int>& from,
                        const std::vector<int>& to) const override;
  double TransferMs(int last, double micro_batch, const std::vector<int>& from,
                    const std::vector<int>& to) const override;
  // Every message of a split-concat transfer holds its link (SplitConcatMs).
  bool TransfersHoldLinks() const override { return true; }
  // Groups the messages by link at the first boundary (Note [Split-concat by link]).
  void TransferMsAt(std::span<const int> lasts, double micro_batch, const std::vector<int>& from,
                    const std::vector<int>& to, double* out) const override;
  double UpdateMs(int first, int last, int device) const override;
  // 2(r-1)/r x P / bw + 2(r-1) x latency with the allreduce bandwidth and latency
  // (LinkSpec::AllReduceBandwidth/AllReduceLatency) of the slowest link of the ring: the
  // intra-server one, or as soon as the devices span servers the slower of both.
  double AllReduceMs(int first, int last, const std::vector<int>& devices) const override;
  double ScalarAllReduceMs(const std::vector<int>& devices) const override;
  // The ring's terms once for all the ranges (RingOf), each range's figure as AllReduceMs's.
  void AllReduceMsFrom(std::span<const int> firsts, int last, const std::vector<int>& devices,
                       double* out) const override;
  double ParameterBytes(int first, int last) const override;
  double AllReduceBucketBytes() const override;
  double StaticMemoryBytes(int first, int last) const override;
  // The training data a device of a stage [first, last] holds (Note [Data in the memory
  // figure] in format/profile.h).
  double DataBytes(int first, int last) const;
  // Parameters x (2 + (state_factor - 2) / replicas): weights and gradients whole.
  double ShardedStaticMemoryBytes(int first, int last, int replicas) const override;
  double ActivationBytes(int first, int last, double samples) const override;
  double StageInputBytes(int first, double samples) const override;
  double DeviceMemoryBytes(int device) const override;
  double ProcessMemoryBytes(int device) const override;
  // Devices with equal speed, memory and process memory are one kind.
  int DeviceKind(int device) const override { return kind_.at(device); }
  double SingleDeviceMs(int global_batch) const override;
  const EmulationCosts* Emulation() const override { return emulation_ ? &*emulation_ : nullptr; }

  const Profile& profile() const { return profile_; }
  const Cluster& cluster() const { return cluster_; }

 private:
  // Transfer's time in ms; its link resources into `resources` when not null. With
  // `group_now`, devices asked for the first time are grouped by link at once, as when
  // asked again (the same figure): the caller asks them at other boundaries next.
  double SplitConcatMs(int last, double micro_batch, const std::vector<int>& from,
                       const std::vector<int>& to, std::vector<int>* resources,
                       bool group_now = false) const;

  // Whether a ring of `devices` (at least one) leaves a server; checks them in range.
  bool RingSpansServers(const std::vector<int>& devices) const;
  // AllReduceMs's terms that do not depend on the layers, for a ring of r >= 2 devices.
  struct Ring {
    double per_byte_share = 0;  // 2(r-1)/r
    double bandwidth = 0;
    double latency_term = 0;  // 2(r-1) x latency
  };
  Ring RingOf(const std::vector<int>& devices) const;
  // AllReduceMs of `bytes` on `ring`: one expression for every caller, so the same bits.
  static double RingMs(const Ring& ring, double bytes) {
    return (ring.per_byte_share * bytes / ring.bandwidth + ring.latency_term) * 1e3;
  }

  const Profile& profile_;
  const Cluster& cluster_;
  CostOptions options_;
  // Prefix sums over layers (size N+1): at PBS, and per measured batch size when present.
  std::vector<double> fwd_prefix_, bwd_prefix_, param_prefix_, saved_prefix_, update_prefix_;
  std::vector<std::vector<double>> fwd_prefix_by_batch_, bwd_prefix_by_batch_;
  // The backward's input and weight parts (measured, or split by weight_grad_share).
  std::vector<double> bwd_in_prefix_, bwd_w_prefix_;
  std::vector<std::vector<double>> bwd_in_prefix_by_batch_, bwd_w_prefix_by_batch_;
  std::vector<double> cut_bytes_;                   // Profile::CutBytes(b) for every b
  std::vector<int> server_of_;                      // device -> server
  std::vector<int> kind_;                           // DeviceKind, from KindOfEachDevice
  std::optional<ClusterEmulationCosts> emulation_;  // when the cluster has `emulation`
  uint64_t serial_;                                 // unique per model made (SplitConcatMs's cache)
  static std::vector<int> KindOfEachDevice(const Cluster& c);
  // Throws unless 0 <= first <= last < num_layers. Inline, its throw out of line: the
  // planners ask the model in their innermost loops.
  void CheckRange(int first, int last) const {
    if (!(0 <= first && first <= last && last < num_layers_)) [[unlikely]]
      RangeOutOfBounds(first, last);
  }
  [[noreturn]] void RangeOutOfBounds(int first, int last) const;
  int num_layers_ = 0;  // profile_.num_layers()
  double ComputeMs(const std::vector<double>& prefix,
                   const std::vector<std::vector<double>>& by_batch, int first, int last,
                   double samples, int device) const;
};

}  // namespace dapple
