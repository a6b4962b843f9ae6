// NCCL through c10d: see nccl_backend.h.
#include "dapple/runtime/comm/nccl_backend.h"

#include <dlfcn.h>
#include <torch/cuda.h>

#include <string_view>

#include "dapple/common/error.h"
#include "dapple/runtime/comm/cuda_module.h"

namespace dapple {

c10::intrusive_ptr<c10d::Backend> MakeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout) {
  std::string why;
  void* module = LoadCudaModule(&why);  // Note [CUDA on demand]
  if (!module) ThrowInput("rank {}: NCCL needs dapple's CUDA part: {}", rank, why);
  if (!torch::cuda::is_available()) {
    ThrowInput("rank {}: NCCL needs a CUDA device, and this machine has none", rank);
  }
  using Make = const char* (*)(const c10::intrusive_ptr<c10d::Store>*, int, int, int64_t,
                               c10::intrusive_ptr<c10d::Backend>*);
  auto make = reinterpret_cast<Make>(::dlsym(module, "dapple_cuda_make_nccl_backend"));
  if (!make) ThrowInput("rank {}: libdapple_cuda.so lacks its NCCL entry point", rank);
  c10::intrusive_ptr<c10d::Backend> backend;
  if (const char* error = make(&store, rank, size, timeout.count(), &backend)) {
    std::string_view what = error;
    ThrowInput("rank {}: cannot start NCCL: {}", rank, what.substr(0, what.find('\n')));
  }
  return backend;
}

}  // namespace dapple
