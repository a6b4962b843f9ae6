// DeviceForLocalRank: the CPU without CUDA devices; a CUDA choice is refused with one line,
// since there is no CUDA transport (the device count is faked).
#include <gtest/gtest.h>

#include "dapple/common/error.h"
#include "dapple/runtime/communicator.h"

namespace dapple {
namespace {

TEST(DeviceChoice, CpuWithoutCudaDevices) {
  EXPECT_EQ(DeviceForLocalRank(0, 0), torch::Device(torch::kCPU));
  EXPECT_EQ(DeviceForLocalRank(3, 0), torch::Device(torch::kCPU));
}

TEST(DeviceChoice, ACudaDeviceWithoutTransportIsRefused) {
  try {
    DeviceForLocalRank(3, 2);
    ADD_FAILURE() << "a CUDA device was accepted";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("LOCAL_RANK 3: device cuda:1 (2 CUDA devices seen)"), std::string::npos) << m;
    EXPECT_NE(m.find("no CUDA transport"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace dapple
