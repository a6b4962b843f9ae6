// Note [A device per process]
// `dapple train --device cpu|cuda|auto` picks each process's compute device: the CPU, or the
// GPU of its LOCAL_RANK (cuda:(LOCAL_RANK mod the node's device count)). The process holds its
// stage's layers, its data, its gradients and its optimizer state there; checkpoints are
// written from CPU copies and loaded onto whatever device the resuming run uses, so a run
// saved on a GPU resumes on the CPU and back. The device only changes where tensors live and
// which transport the communicator uses for them (Note [Transport by device],
// communicator.h): there is one runtime for both. The CUDA half has not run on a GPU yet
// (docs/gpu.md).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "dapple/runtime/comm/cuda_module.h"  // CudaDeviceCount

namespace dapple {

enum class DeviceChoice { kCpu, kCuda, kAuto };

// "cpu" | "cuda" | "auto"; anything else throws InputError naming `flag`.
DeviceChoice ParseDeviceChoice(const std::string& text, const std::string& flag = "--device");
std::string ToString(DeviceChoice choice);

// The one place that maps a process to its compute device. kCpu: the CPU; kAuto: the GPU of
// the local rank when there is one, else the CPU; kCuda: the GPU of the local rank, and
// InputError (one line naming --device and the rank) when there is none.
// `cuda_devices` < 0: CudaDeviceCount() (cuda_module.h: it loads the CUDA part, Note [CUDA on
// demand]; tests pass a count).
torch::Device DeviceForLocalRank(DeviceChoice choice, int local_rank, int cuda_devices = -1);

// Makes `device` this thread's current CUDA device (NCCL and the caching allocator work on
// the current one); nothing for the CPU.
void UseDevice(const torch::Device& device);

// Blocks until the work queued on `device` finished (timing on a GPU); nothing for the CPU.
void SynchronizeDevice(const torch::Device& device);

// Note [Memory as a GPU holds it]: on a GPU a rank's memory is what PyTorch's caching
// allocator holds: `allocated` (the tensors) and `reserved` (the allocator's blocks, what the
// GPU cannot give to anyone else). The peaks since the last reset; zeros for the CPU, where the
// process's resident memory is the measure (Note [Memory above the start], train_report.h).
struct DeviceMemory {
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
};
DeviceMemory PeakDeviceMemory(const torch::Device& device);
// The bytes of tensors the caching allocator holds now (0 for the CPU).
int64_t DeviceAllocatedBytes(const torch::Device& device);
// Starts the peaks again from what is held now; nothing for the CPU.
void ResetPeakDeviceMemory(const torch::Device& device);
// The GPU's whole memory in bytes (0 for the CPU).
int64_t DeviceTotalMemory(const torch::Device& device);
// "NVIDIA H100 80GB HBM3" (the CUDA device's name); "cpu" for the CPU.
std::string DeviceName(const torch::Device& device);

}  // namespace dapple
