// NCCL through c10d: see nccl_backend.h.
#include "dapple/runtime/nccl_backend.h"

#include <torch/cuda.h>

#include <string_view>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "dapple/common/error.h"

namespace dapple {

c10::intrusive_ptr<c10d::Backend> MakeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout) {
  if (!torch::cuda::is_available()) {
    ThrowInput("rank {}: NCCL needs a CUDA device, and this machine has none", rank);
  }
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  try {
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  } catch (const std::exception& e) {
    std::string_view what = e.what();
    ThrowInput("rank {}: cannot start NCCL: {}", rank, what.substr(0, what.find('\n')));
  }
}

}  // namespace dapple
