// NCCL on a GPU: one rank's allreduce through dapple's backend. Skipped without a CUDA device.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "dapple/runtime/comm/nccl_backend.h"

namespace dapple {
namespace {

TEST(NcclBackendGpu, OneRankAllReduceLeavesTheTensor) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto nccl = MakeNcclBackend(store, 0, 1, std::chrono::seconds(60));
  std::vector<torch::Tensor> t{
      torch::arange(8, torch::dtype(torch::kFloat32).device(torch::kCUDA))};
  nccl->allreduce(t)->wait();
  EXPECT_TRUE(torch::equal(t[0].cpu(), torch::arange(8, torch::kFloat32)));
}

}  // namespace
}  // namespace dapple
