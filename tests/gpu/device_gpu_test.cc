// The CUDA halves of the device choice, the transports, the timer and the memory figures
// (docs/gpu.md). Each test skips without a CUDA device; none has run on a GPU yet.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdlib>

#include "dapple/profiler/device_timer.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/device.h"
#include "dapple/runtime/launch/launcher.h"

namespace dapple {
namespace {

#define SKIP_WITHOUT_A_GPU() \
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

TEST(DeviceGpu, CudaIsTheGpuOfTheLocalRank) {
  SKIP_WITHOUT_A_GPU();
  EXPECT_EQ(DeviceForLocalRank(DeviceChoice::kCuda, 0), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(DeviceForLocalRank(DeviceChoice::kAuto, 0), torch::Device(torch::kCUDA, 0));
  EXPECT_NE(DeviceName(torch::Device(torch::kCUDA, 0)), "cpu");
  EXPECT_GT(DeviceTotalMemory(torch::Device(torch::kCUDA, 0)), int64_t{1} << 30);
}

TEST(DeviceGpu, PeaksFollowTheCachingAllocator) {
  SKIP_WITHOUT_A_GPU();
  const torch::Device gpu(torch::kCUDA, 0);
  UseDevice(gpu);
  ResetPeakDeviceMemory(gpu);
  const int64_t before = DeviceAllocatedBytes(gpu);
  {
    torch::Tensor t = torch::ones({1 << 20}, torch::dtype(torch::kFloat32).device(gpu));
    EXPECT_GE(DeviceAllocatedBytes(gpu) - before, 4 << 20);
  }
  const DeviceMemory m = PeakDeviceMemory(gpu);
  EXPECT_GE(m.peak_allocated_bytes, before + (4 << 20));
  EXPECT_GE(m.peak_reserved_bytes, m.peak_allocated_bytes);
}

TEST(DeviceGpu, TimerMeasuresTheKernelsNotTheLaunch) {
  SKIP_WITHOUT_A_GPU();
  const torch::Device gpu(torch::kCUDA, 0);
  UseDevice(gpu);
  torch::Tensor a = torch::randn({4096, 4096}, torch::device(gpu));
  (void)torch::mm(a, a);  // warm-up: cuBLAS handles
  DeviceTimer timer(gpu);
  timer.Start();
  for (int i = 0; i < 10; ++i) a = torch::mm(a, a).div_(4096);
  const double ms = timer.Lap();
  EXPECT_GT(ms, 0.0);
  EXPECT_LT(ms, 10000.0);
}

// One rank with a GPU of its own: NCCL; forced staging: Gloo through host copies. Either way
// an allreduce of a CUDA tensor leaves it on the GPU with its values, and a message to
// oneself arrives.
void ExpectOneRankCollectives(Transport want) {
  DistEnv env;
  env.master_port = PickFreePort();
  const torch::Device gpu(torch::kCUDA, 0);
  UseDevice(gpu);
  Communicator comm(env, std::chrono::seconds(60), gpu);
  EXPECT_EQ(comm.transport(), want) << TransportName(comm.transport());
  torch::Tensor t = torch::arange(8, torch::dtype(torch::kFloat32).device(gpu));
  comm.AllReduceSumAsync(t, "", "gpu test: allreduce").Wait(std::chrono::seconds(60));
  EXPECT_TRUE(t.is_cuda());
  EXPECT_TRUE(torch::equal(t.cpu(), torch::arange(8, torch::kFloat32)));
  torch::Tensor cpu = torch::ones({3}, torch::kFloat64);  // CPU tensors stay on Gloo
  comm.AllReduceSum(cpu, "", "gpu test: a CPU allreduce");
  EXPECT_DOUBLE_EQ(cpu.sum().item<double>(), 3.0);
}

TEST(DeviceGpu, OneRankOverNccl) {
  SKIP_WITHOUT_A_GPU();
  ExpectOneRankCollectives(Transport::kNccl);
}

TEST(DeviceGpu, OneRankStagedThroughTheHost) {
  SKIP_WITHOUT_A_GPU();
  setenv("DAPPLE_CUDA_TRANSPORT", "staged", 1);
  ExpectOneRankCollectives(Transport::kStaged);
  unsetenv("DAPPLE_CUDA_TRANSPORT");
}

}  // namespace
}  // namespace dapple
