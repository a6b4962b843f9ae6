// Note [A device per process]: see device.h. The CUDA calls have not run on a GPU.
#include "dapple/runtime/comm/device.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#include <torch/cuda.h>

#include "dapple/common/error.h"
#include "dapple/runtime/comm/cuda_module.h"

namespace dapple {

DeviceChoice ParseDeviceChoice(const std::string& text, const std::string& flag) {
  if (text == "cpu") return DeviceChoice::kCpu;
  if (text == "cuda") return DeviceChoice::kCuda;
  if (text == "auto") return DeviceChoice::kAuto;
  ThrowInput("{} {}: expected cpu, cuda or auto", flag, text);
}

std::string ToString(DeviceChoice choice) {
  switch (choice) {
    case DeviceChoice::kCpu:
      return "cpu";
    case DeviceChoice::kCuda:
      return "cuda";
    case DeviceChoice::kAuto:
      return "auto";
  }
  return "?";
}

torch::Device DeviceForLocalRank(DeviceChoice choice, int local_rank, int cuda_devices) {
  if (choice == DeviceChoice::kCpu) return torch::Device(torch::kCPU);
  if (cuda_devices < 0) cuda_devices = CudaDeviceCount();
  if (cuda_devices == 0) {
    if (choice == DeviceChoice::kAuto) return torch::Device(torch::kCPU);
    ThrowInput("--device cuda: LOCAL_RANK {} has no CUDA device (this machine shows none)",
               local_rank);
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % cuda_devices));
}

void UseDevice(const torch::Device& device) {
  if (device.is_cuda()) c10::cuda::set_device(device.index());
}

void SynchronizeDevice(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

DeviceMemory PeakDeviceMemory(const torch::Device& device) {
  if (!device.is_cuda()) return {};
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return {stats.allocated_bytes[all].peak, stats.reserved_bytes[all].peak};
}

int64_t DeviceAllocatedBytes(const torch::Device& device) {
  if (!device.is_cuda()) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
      .current;
}

void ResetPeakDeviceMemory(const torch::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

int64_t DeviceTotalMemory(const torch::Device& device) {
  if (!device.is_cuda()) return 0;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device.index()) != cudaSuccess) return 0;
  return static_cast<int64_t>(prop.totalGlobalMem);
}

std::string DeviceName(const torch::Device& device) {
  if (!device.is_cuda()) return "cpu";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device.index()) != cudaSuccess) return device.str();
  return prop.name;
}

}  // namespace dapple
