// A fake CostModel for tests (header-only): every cost is a public knob, so a schedule,
// simulator or planner test states its costs directly instead of deriving them from a
// profile and a cluster.
//
// Example:
//   dapple::FakeCostModel cost(/*num_layers=*/4, /*num_devices=*/4);  // 1 ms fwd, 2 ms bwd
//   cost.fwd_ms[3] = 5;        // a slow last layer
//   cost.transfer_ms = 0.5;    // every split-concat transfer takes 0.5 ms
//   cost.allreduce_ms = 3;     // every allreduce among > 1 devices takes 3 ms
//
// Contracts (all linear, so expected values are easy to compute by hand):
//   ForwardMs(a, b, samples, d)  = sum(fwd_ms[a..b]) x samples / pbs / speed[d]
//   BackwardMs likewise with bwd_ms; BackwardInputMs = BackwardWeightMs = BackwardMs / 2
//                                  (CostModel's default split: with the default bwd 2 ms, I = W =
//                                  F).
//   CutBytes(b, samples)         = act_bytes[b] x samples / pbs (a chain)
//   Transfer(...)                = {transfer_ms + transfer_ms_per_sample x micro_batch,
//                                   transfer_resources}, whatever the devices
//   UpdateMs(a, b, d)            = sum(update_ms[a..b]) / speed[d] (0 by default)
//   AllReduceMs(a, b, devices)   = allreduce_ms + allreduce_ms_per_byte x sum(param_bytes[a..b])
//                                  when devices.size() > 1, else 0
//   ParameterBytes(a, b)         = sum(param_bytes[a..b])
//   AllReduceBucketBytes()       = bucket_bytes (25 MiB: with the default 1 MB of parameters
//                                  per layer, a stage of up to 26 layers is one bucket)
//   StaticMemoryBytes(a, b)      = sum(param_bytes[a..b]) x state_factor
//   ActivationBytes(a, b, s)     = sum(act_bytes[a..b]) x s / pbs
//   StageInputBytes(a, s)        = act_bytes[a - 1] x s / pbs (input_bytes x s / pbs for a == 0);
//                                  0 without count_stage_inputs
//   DeviceMemoryBytes(d)         = memory_bytes
//   SingleDeviceMs(gbs)          = gbs / pbs x sum(fwd_ms + bwd_ms)
#pragma once

#include <vector>

#include "dapple/cost/cost_model.h"
#include "dapple/cost/emulation_costs.h"

namespace dapple {

class FakeCostModel : public CostModel, public EmulationCosts {
 public:
  // Defaults: every layer 1 ms forward, 2 ms backward, 1 MB activation, 1 MB parameters,
  // free optimizer update; pbs 1; free transfers and allreduce; 16 GB per device; every device
  // speed 1.
  FakeCostModel(int num_layers, int num_devices)
      : fwd_ms(num_layers, 1.0),
        bwd_ms(num_layers, 2.0),
        act_bytes(num_layers, 1e6),
        param_bytes(num_layers, 1e6),
        update_ms(num_layers, 0.0),
        speed(num_devices, 1.0),
        num_layers_(num_layers),
        num_devices_(num_devices) {}

  // Per layer (size num_layers).
  std::vector<double> fwd_ms, bwd_ms, act_bytes, param_bytes, update_ms;
  // Per device (size num_devices); compute time is divided by it.
  std::vector<double> speed;
  int pbs = 1;
  double input_bytes = 0;  // the model input at pbs
  // false: StageInputBytes is 0, so a micro-batch holds act_bytes alone (for tests that count
  // the micro-batches a schedule holds).
  bool count_stage_inputs = true;
  double transfer_ms = 0;
  double transfer_ms_per_sample = 0;
  std::vector<int> transfer_resources;  // what every transfer holds (none by default)
  double allreduce_ms = 0;
  double allreduce_ms_per_byte = 0;
  double bucket_bytes = 25 << 20;
  double state_factor = 4.0;
  double memory_bytes = 16e9;
  // Emulated devices (CostModel::Emulation): set shared_compute > 0 to have them.
  double shared_compute = 0;
  double shared_compute_resume_ms = 0;
  double shared_compute_wake_ms = 0;
  double transfer_compute_load = 0;   // every transfer
  double allreduce_compute_load = 0;  // every allreduce
  const EmulationCosts* Emulation() const override { return shared_compute > 0 ? this : nullptr; }
  double SharedCompute() const override { return shared_compute; }
  double ResumeMs() const override { return shared_compute_resume_ms; }
  double WakeMs() const override { return shared_compute_wake_ms; }
  double TransferLoad(const std::vector<int>&, const std::vector<int>&) const override {
    return transfer_compute_load;
  }
  double AllReduceLoad(const std::vector<int>&) const override { return allreduce_compute_load; }

  int num_layers() const override { return num_layers_; }
  int num_devices() const override { return num_devices_; }
  int profile_batch_size() const override { return pbs; }

  double ForwardMs(int first, int last, double samples, int device) const override {
    return Sum(fwd_ms, first, last) * samples / pbs / speed.at(device);
  }
  double BackwardMs(int first, int last, double samples, int device) const override {
    return Sum(bwd_ms, first, last) * samples / pbs / speed.at(device);
  }
  double CutBytes(int last, double samples) const override {
    return act_bytes.at(last) * samples / pbs;
  }
  TransferCost Transfer(int last, double micro_batch, const std::vector<int>& from,
                        const std::vector<int>& to) const override {
    return {transfer_ms + transfer_ms_per_sample * micro_batch, transfer_resources};
  }
  bool TransfersHoldLinks() const override { return !transfer_resources.empty(); }
  double UpdateMs(int first, int last, int device) const override {
    return Sum(update_ms, first, last) / speed.at(device);
  }
  double scalar_allreduce_ms = 0;  // CostModel::ScalarAllReduceMs on 2 or more devices
  double ScalarAllReduceMs(const std::vector<int>& devices) const override {
    return devices.size() <= 1 ? 0.0 : scalar_allreduce_ms;
  }
  double AllReduceMs(int first, int last, const std::vector<int>& devices) const override {
    if (devices.size() <= 1) return 0.0;
    return allreduce_ms + allreduce_ms_per_byte * Sum(param_bytes, first, last);
  }
  double ParameterBytes(int first, int last) const override {
    return Sum(param_bytes, first, last);
  }
  double AllReduceBucketBytes() const override { return bucket_bytes; }
  double StaticMemoryBytes(int first, int last) const override {
    return Sum(param_bytes, first, last) * state_factor;
  }
  double ActivationBytes(int first, int last, double samples) const override {
    return Sum(act_bytes, first, last) * samples / pbs;
  }
  double StageInputBytes(int first, double samples) const override {
    if (!count_stage_inputs) return 0;
    return (first > 0 ? act_bytes.at(first - 1) : input_bytes) * samples / pbs;
  }
  double DeviceMemoryBytes(int device) const override { return memory_bytes; }
  double SingleDeviceMs(int global_batch) const override {
    return (Sum(fwd_ms, 0, num_layers_ - 1) + Sum(bwd_ms, 0, num_layers_ - 1)) * global_batch / pbs;
  }

 private:
  static double Sum(const std::vector<double>& v, int first, int last) {
    double s = 0;
    for (int i = first; i <= last; ++i) s += v.at(i);
    return s;
  }
  int num_layers_;
  int num_devices_;
};

}  // namespace dapple
