// Note [Timing on the device]: see device_timer.h. The CUDA half has not run on a GPU.
#include "dapple/profiler/device_timer.h"

#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

namespace dapple {

// The lap's start is events[at], its end events[1 - at]; the end starts the next lap.
struct DeviceTimer::CudaEvents {
  c10::cuda::CUDAEvent events[2] = {c10::cuda::CUDAEvent(cudaEventDefault),
                                    c10::cuda::CUDAEvent(cudaEventDefault)};
  int at = 0;
};

DeviceTimer::DeviceTimer(const torch::Device& device) : device_(device) {
  if (device_.is_cuda()) events_ = std::make_unique<CudaEvents>();
}

DeviceTimer::~DeviceTimer() = default;

void DeviceTimer::Start() {
  if (events_) {
    events_->events[events_->at].record(c10::cuda::getCurrentCUDAStream(device_.index()));
  } else {
    last_ = std::chrono::steady_clock::now();
  }
}

double DeviceTimer::Lap() {
  if (!events_) {
    const auto now = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
    return ms;
  }
  CudaEvents& e = *events_;
  c10::cuda::CUDAEvent& end = e.events[1 - e.at];
  end.record(c10::cuda::getCurrentCUDAStream(device_.index()));
  end.synchronize();
  const double ms = e.events[e.at].elapsed_time(end);
  e.at = 1 - e.at;
  return ms;
}

}  // namespace dapple
