// libdapple_cuda.so: the part of dapple that links libtorch_cuda (Note [CUDA on demand] in
// runtime/comm/cuda_module.h). dapple's processes load it with dlopen only when they use a CUDA
// device, so that a CPU process never maps libtorch_cuda and the CUDA libraries it needs.
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

// A ProcessGroupNCCL of `size` ranks meeting in `*store`, this process being `rank`, into
// `*out`. Returns nullptr, or what went wrong (valid until the next call in this thread).
extern "C" __attribute__((visibility("default"))) const char* dapple_cuda_make_nccl_backend(
    const c10::intrusive_ptr<c10d::Store>* store, int rank, int size, int64_t timeout_ms,
    c10::intrusive_ptr<c10d::Backend>* out) {
  thread_local std::string error;
  try {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = std::chrono::milliseconds(timeout_ms);
    *out = c10::make_intrusive<c10d::ProcessGroupNCCL>(*store, rank, size, options);
    return nullptr;
  } catch (const std::exception& e) {
    error = e.what();
    return error.c_str();
  }
}
