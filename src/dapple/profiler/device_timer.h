// Note [Timing on the device]: on the CPU a layer's op has finished when its call returns, so
// the steady clock around the call times it. On a GPU the call only queues kernels: the timer
// records CUDA events on the current stream at Start and at each Lap, and Lap waits for its
// event, so a lap is the GPU's time between the two events (what the kernels took), not the
// host's time to queue them. The profiler's warm-up runs before any lap is kept (the first
// calls build cuBLAS handles and grow the caching allocator). The CUDA half has not run on a
// GPU yet (docs/gpu.md).
#pragma once

#include <torch/types.h>

#include <chrono>
#include <memory>

namespace dapple {

class DeviceTimer {
 public:
  explicit DeviceTimer(const torch::Device& device);
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;

  // Marks the start of the next lap.
  void Start();
  // Milliseconds since Start or the previous Lap; the next lap starts here.
  double Lap();

 private:
  struct CudaEvents;  // two CUDA events, swapped at each lap
  torch::Device device_;
  std::chrono::steady_clock::time_point last_;
  std::unique_ptr<CudaEvents> events_;
};

}  // namespace dapple
