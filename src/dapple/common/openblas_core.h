// Which OpenBLAS kernel (OPENBLAS_CORETYPE) dapple asks for on a CPU, when the variable is
// unset: `dapple profile` and the launcher of `dapple train` both set it from this choice,
// so that profiles and training compute alike. Torch-free.
#pragma once

#include <string>

namespace dapple {

// The OPENBLAS_CORETYPE for a CPU with these /proc/cpuinfo contents (the first "vendor_id"
// and "flags" lines): "Haswell" for AMD CPUs with avx2 (with or without avx512f: there the
// AVX2 kernels ran 1.07-1.36x faster than SkylakeX's, scripts/bench_openblas_core.sh), else
// "SkylakeX" with avx512f, "Haswell" with avx2, and "" without either (OpenBLAS detects the
// CPU itself).
std::string OpenBlasCoreTypeFor(const std::string& cpuinfo);

// OpenBlasCoreTypeFor(the contents of /proc/cpuinfo); "" when it cannot be read.
std::string OpenBlasCoreTypeForThisCpu();

// Sets OPENBLAS_CORETYPE in this process's environment to OpenBlasCoreTypeForThisCpu() when it is
// unset (and the CPU has a type). OpenBLAS reads it only when it loads, so this serves the
// processes started after it (`dapple` before it runs dapple-torch, a launcher for its ranks),
// or this one before OpenBLAS initialises.
void SetOpenBlasCoreTypeIfUnset();

}  // namespace dapple
