// NCCL on a machine without a GPU: compiled and linked in every build, refused in one line.
#include "dapple/runtime/nccl_backend.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "dapple/common/error.h"

namespace dapple {
namespace {

TEST(NcclBackend, WithoutACudaDeviceIsOneLineNamingTheRank) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this machine has a CUDA device";
  auto store = c10::make_intrusive<c10d::HashStore>();
  try {
    MakeNcclBackend(store, 0, 1, std::chrono::seconds(10));
    FAIL() << "NCCL started without a CUDA device";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "rank 0: NCCL needs a CUDA device, and this machine has none");
  }
}

}  // namespace
}  // namespace dapple
