// The processes these tests start, dapple's and the PyTorch references' (tests/torch/*.py under
// /usr/bin/python3), compute with one OpenBLAS kernel: the one dapple's launcher asks for
// (OPENBLAS_CORETYPE, common/openblas_core.h), set here before any test runs when it is unset.
// A reference left to OpenBLAS's own detection takes another kernel on some CPUs (Cooperlake on
// an AMD EPYC with avx512_bf16, where dapple asks for Haswell), and the float64 comparisons of
// models with batch norm on micro-batches of 1-2 samples (ResNet-18 with re-computation,
// MobileNetV2: parameters 4e-6 apart after two steps, against 1e-9) then measure the kernels'
// rounding, not dapple.
#include "dapple/common/openblas_core.h"

namespace {

const bool kReferenceKernelSet = [] {
  dapple::SetOpenBlasCoreTypeIfUnset();
  return true;
}();

}  // namespace
