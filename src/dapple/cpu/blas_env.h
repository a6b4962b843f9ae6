// The CPU compute environment of libtorch: thread counts, cache eviction for cold timings,
// and a description of the CPU and its BLAS for profiles. Shared by
// `dapple profile`, `dapple calibrate` and `dapple train`.
#pragma once

#include <string>

namespace dapple {

// Sets libtorch's intra-op threads (OpenMP, and MKL's with them) to `threads` (> 0), or to the
// number of cores when `threads` is 0. Returns the count used.
int SetComputeThreads(int threads);

// Writes 64 MiB (twice this machine's 32 MiB L3), so that what is timed next finds its data
// in memory, not in the caches (Note [Cold update], Note [Cold caches] in profiler.cc; the
// resume cost's cold chunk in calibrate). The buffer is allocated on the first call and kept.
void EvictCpuCaches();

// "AMD EPYC 9654 96-Core Processor" from /proc/cpuinfo, or "unknown cpu".
std::string CpuModelName();

// The BLAS libtorch was built with, as its build configuration names it ("mkl" for PyPI's
// wheel), or "unknown".
std::string BlasName();

}  // namespace dapple
