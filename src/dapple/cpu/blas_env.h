// The CPU compute environment of libtorch: which OpenBLAS kernel to use, thread counts,
// cache eviction for cold timings, and a description of the CPU for profiles. Shared by
// `dapple profile`, `dapple calibrate` and `dapple train`.
#pragma once

#include <string>

namespace dapple {

// If OPENBLAS_CORETYPE is unset and this CPU has a type (OpenBlasCoreTypeForThisCpu in
// common/openblas_core.h): sets it and re-executes the
// running program (/proc/self/exe) with the same arguments, because OpenBLAS reads the
// variable only when it is loaded. Does not return then; returns when there is nothing to
// do or the re-exec fails (with a warning on stderr). `argv` is the program's argv, or
// nullptr to read it from /proc/self/cmdline.
void EnsureOpenBlasCoreType(char** argv = nullptr);

// Sets libtorch's intra-op threads and, when OpenBLAS is loaded, its threads to `threads`
// (> 0), or to the number of cores when `threads` is 0. Returns the count used.
int SetComputeThreads(int threads);

// Writes 64 MiB (twice this machine's 32 MiB L3), so that what is timed next finds its data
// in memory, not in the caches (Note [Cold update], Note [Cold caches] in profiler.cc; the
// resume cost's cold chunk in calibrate). The buffer is allocated on the first call and kept.
void EvictCpuCaches();

// "AMD EPYC 9654 96-Core Processor" from /proc/cpuinfo, or "unknown cpu".
std::string CpuModelName();

// OPENBLAS_CORETYPE as set, or "unset".
std::string OpenBlasCoreType();

// The kernel OpenBLAS actually uses (openblas_get_corename(): "SkylakeX", "Zen", ...), or
// "not loaded" when libtorch's BLAS is not OpenBLAS.
std::string OpenBlasCoreName();

}  // namespace dapple
