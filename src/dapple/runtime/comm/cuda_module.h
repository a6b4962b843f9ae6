// Loading dapple's CUDA part on demand.
//
// Note [CUDA on demand]: the torch wheel is a CUDA build whose libtorch_cuda pulls in cuBLAS,
// cuBLASLt, cuFFT, cuSPARSE and nvJitLink: loading them made every dapple process about
// 235 MB larger at its start, on machines with a GPU or without. dapple links libtorch_cpu
// alone, and what needs libtorch_cuda (ProcessGroupNCCL) lives in libdapple_cuda.so, which a
// process loads with dlopen when it uses a CUDA device. Loading it also registers libtorch's
// CUDA kernels and hooks, so that torch::cuda::is_available() and CUDA tensors work after.
#pragma once

#include <string>

namespace dapple {

// Loads libdapple_cuda.so (and with it libtorch_cuda) once per process. Looks in
// $DAPPLE_CUDA_MODULE (a file), beside the executable, then in the build folder it was built
// in. Returns the handle, or nullptr with the loader's reason in `why`.
void* LoadCudaModule(std::string* why);

// Whether this machine seems to have an NVIDIA GPU (its driver's device files), without
// loading any CUDA library.
bool NvidiaDriverPresent();

// The CUDA devices this process sees: 0 without an NVIDIA driver (nothing loaded), else
// libtorch's count once libdapple_cuda.so is loaded (0 when it cannot be).
int CudaDeviceCount();

}  // namespace dapple
