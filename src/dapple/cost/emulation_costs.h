// What the simulator charges for devices that are processes sharing one machine's cores
// (Note [Emulated devices] in format/cluster.h). The one door through which these terms
// reach the simulator: CostModel::Emulation() is null for devices of their own.
#pragma once

#include <vector>

#include "dapple/format/cluster.h"

namespace dapple {

class EmulationCosts {
 public:
  virtual ~EmulationCosts() = default;
  // The compute the devices share, in devices computing alone (> 0).
  virtual double SharedCompute() const = 0;
  // What a forward or backward takes beyond its compute when its device was idle before it.
  virtual double ResumeMs() const = 0;
  // How long after its message is in a device that waited at a receive goes on.
  virtual double WakeMs() const = 0;
  // The shared compute, in devices, that a transfer from `from` to `to` (split-concat
  // pieces in parallel) or an allreduce over `devices` takes while it runs.
  virtual double TransferLoad(const std::vector<int>& from, const std::vector<int>& to) const = 0;
  virtual double AllReduceLoad(const std::vector<int>& devices) const = 0;
};

// A cluster's `emulation` block, charged over its servers and links.
class ClusterEmulationCosts final : public EmulationCosts {
 public:
  // REQUIRES: cluster.emulation is set.
  explicit ClusterEmulationCosts(const Cluster& cluster);

  double SharedCompute() const override { return emulation_.shared_compute; }
  double ResumeMs() const override { return 1000 * emulation_.resume_s; }
  double WakeMs() const override { return 1000 * emulation_.wake_s; }
  double TransferLoad(const std::vector<int>& from, const std::vector<int>& to) const override;
  double AllReduceLoad(const std::vector<int>& devices) const override;

 private:
  Emulation emulation_;
  std::vector<int> server_of_;  // device -> server
  // Each link's allreduce bus bandwidth over its point-to-point bandwidth, at most 1.
  double intra_allreduce_rate_ = 1, inter_allreduce_rate_ = 1;
};

}  // namespace dapple
