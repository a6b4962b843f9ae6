// DeviceForLocalRank (Note [A device per process]): --device cpu|cuda|auto against a device
// count (faked here: the machine's own count is what a real run passes).
#include <gtest/gtest.h>

#include "dapple/common/error.h"
#include "dapple/runtime/comm/device.h"
#include "dapple/runtime/comm/transport.h"

namespace dapple {
namespace {

TEST(DeviceChoice, CpuIsTheCpuWhateverTheGpus) {
  EXPECT_EQ(DeviceForLocalRank(DeviceChoice::kCpu, 0, 0), torch::Device(torch::kCPU));
  EXPECT_EQ(DeviceForLocalRank(DeviceChoice::kCpu, 3, 8), torch::Device(torch::kCPU));
}

TEST(DeviceChoice, CudaTakesTheGpuOfTheLocalRank) {
  EXPECT_EQ(DeviceForLocalRank(DeviceChoice::kCuda, 3, 2), torch::Device(torch::kCUDA, 1));
  EXPECT_EQ(DeviceForLocalRank(DeviceChoice::kAuto, 5, 8), torch::Device(torch::kCUDA, 5));
}

TEST(DeviceChoice, AutoWithoutGpusIsTheCpu) {
  EXPECT_EQ(DeviceForLocalRank(DeviceChoice::kAuto, 1, 0), torch::Device(torch::kCPU));
}

TEST(DeviceChoice, CudaWithoutGpusIsOneLineNamingTheFlagAndRank) {
  try {
    DeviceForLocalRank(DeviceChoice::kCuda, 3, 0);
    ADD_FAILURE() << "a missing GPU was accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "--device cuda: LOCAL_RANK 3 has no CUDA device (this machine shows none)");
  }
}

TEST(DeviceChoice, ParsesTheFlag) {
  EXPECT_EQ(ParseDeviceChoice("auto"), DeviceChoice::kAuto);
  EXPECT_EQ(ToString(ParseDeviceChoice("cuda")), "cuda");
  EXPECT_THROW(ParseDeviceChoice("gpu"), InputError);
}

// Note [Transport by device]: NCCL only when every rank has a GPU of its own.
TEST(TransportChoice, NcclOnlyForDistinctGpus) {
  const torch::Device gpu(torch::kCUDA, 0);
  EXPECT_EQ(ChooseTransport(gpu, {"a/cuda:0", "a/cuda:1", "b/cuda:0"}), Transport::kNccl);
  EXPECT_EQ(ChooseTransport(gpu, {"a/cuda:0", "a/cuda:0"}), Transport::kStaged);
  EXPECT_EQ(ChooseTransport(gpu, {"a/cuda:0", "a/cpu"}), Transport::kStaged);
  EXPECT_EQ(ChooseTransport(torch::Device(torch::kCPU), {"a/cpu", "a/cpu"}), Transport::kGloo);
}

}  // namespace
}  // namespace dapple
