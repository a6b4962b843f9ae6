// The least compute any plan can give each layer, for lower bounds over many plans at once
// (a micro-batch size's search, the exhaustive search's unplaced layers).
#pragma once

#include <vector>

#include "dapple/cost/cost_model.h"

namespace dapple {

// Per layer, over every way a plan with micro-batches of `m` samples may run it (1 to
// min(m, devices) replicas, with slices of floor or ceil(m / replicas) samples, on any
// device, with the backward whole or split into I and W), the least of: its forward and
// its backward along one micro-batch's way (the backward's I part where that is less), and
// its compute of one micro-batch summed over the replicas (device-ms: m samples at the
// least compute per sample). As prefix sums:
// forward[l] is the sum over layers [0, l), and so on (size layers + 1). Assumes what the
// cost models do: a stage's compute is the sum of its layers'.
struct ComputeFloors {
  std::vector<double> forward, backward, work;
  // The largest over layers of the least forward + backward of a stage's slowest replica
  // (the one with the largest slice, ceil(m / replicas) samples): no stage holding that
  // layer runs a micro-batch faster.
  double busiest = 0;
};
ComputeFloors ComputeFloorsFor(const CostModel& cost, int m);

// A lower bound of the simulated iteration time of every plan of `global_batch` samples in
// micro-batches of `m` (any partition, replication, placement, schedule or chunking): the
// compute of the whole batch at its floors shared by the devices that can compute (a stage
// has at most m replicas, so at most layers x m devices do), one micro-batch's way forward
// and back through every layer, and M micro-batches through the stage of the busiest layer.
double MicroBatchLowerBound(const CostModel& cost, int global_batch, int m);

}  // namespace dapple
