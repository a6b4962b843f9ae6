// Steps of Calibrate (calibration.cc) beyond the ping-pong: the allreduce sweep of a group
// and the compute speed of a device while every device computes. Internal to the calibrate layer.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "dapple/calibrate/calibration.h"

namespace dapple {

class Communicator;

namespace internal {

// Shared by the steps: the fewest timed repeats that make a sample.
constexpr int kMinRepeats = 3;
double SecondsSince(std::chrono::steady_clock::time_point t0);
// "16 MiB", "4 KiB", "4 B".
std::string ByteSize(double bytes);
// How many repeats of an operation predicted to take `op_s` fit in `left_s` after one
// warm-up: at most `repeats`; 0 when fewer than kMinRepeats fit.
int RepeatsThatFit(double op_s, double left_s, int repeats);
// The upper median. REQUIRES: !v.empty().
double Median(std::vector<double> v);

// Allreduce (float32 sum over the members of `group`, "" = the world) time per call against
// size. Called by exactly the `members` (ascending global ranks); the first member decides
// each size and its repeat count under the budget and shares it through a tiny allreduce.
std::vector<TimingSample> MeasureAllReduce(Communicator& comm, const std::string& group,
                                           const std::vector<int>& members,
                                           const CalibrationOptions& o);

// Collective over the world: a fixed matmul loop timed on rank 0 alone (the others wait),
// the resume cost's chunk alone cold with `cold_caches`,
// then on every rank at once; then the resume cost and, with `one_machine`, the wake-up
// cost beyond `link_latency_s` (token rings). Every rank returns the same result.
ComputeSpeed MeasureComputeSpeed(Communicator& comm, bool one_machine, bool cold_caches,
                                 double link_latency_s);

// Collective over the world (3 or more ranks): the compute, in devices, that one stream from
// rank a to rank b takes from cores the ranks share (Note [Stream load]). `speed` is
// MeasureComputeSpeed's result. Every rank returns the same value, >= 0.
double MeasureStreamLoad(Communicator& comm, int a, int b, const ComputeSpeed& speed);

// Collective over a world of exactly 2 ranks (Note [Stream load with two ranks]): the compute,
// in devices, that a stream from rank 0 to rank 1 takes while both compute. Both return it.
double MeasureStreamLoadOfPair(Communicator& comm, const ComputeSpeed& speed);

// Collective over the world (3 or more ranks): Note [Allreduce load]. Ranks a and b (one
// server) allreduce in the group `group`, which they created beforehand. Every rank returns
// the same result.
AllReduceLoad MeasureAllReduceLoad(Communicator& comm, int a, int b, const std::string& group,
                                   const ComputeSpeed& speed);

}  // namespace internal
}  // namespace dapple
