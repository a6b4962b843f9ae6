#!/usr/bin/env bash
# Collects what scripts/gpu_check.sh needs on a GPU machine that cannot build dapple (no
# Debian -dev packages there) into .gpu/ (ignored by git): the built dapple, dapple-torch and
# gpu_tests from build/ with libdapple_cuda.so beside them (they load it from there), and the shared libraries they need that are neither libtorch's (the
# GPU machine's python3 has the same torch, 2.11.0+cu130, whose lib/ the check puts on
# LD_LIBRARY_PATH) nor the C and C++ runtimes every Linux has. Prints the bundle's size, which
# must stay within the device tool's 64 MiB (docs/gpu.md).
#   scripts/build.sh (with DAPPLE_BUILD_TARGETS="dapple dapple-torch gpu_tests"), then
#   scripts/gpu_bundle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DAPPLE_BUILD_DIR:-build}
bins=("$build/tools/dapple/dapple" "$build/tools/dapple/dapple-torch" "$build/tests/gpu_tests")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "gpu_bundle: $b is not built (scripts/build.sh first)" >&2; exit 2; }
done
module="$build/src/libdapple_cuda.so"  # Note [CUDA on demand]: loaded beside the executable
[ -f "$module" ] || { echo "gpu_bundle: $module is not built (scripts/build.sh first)" >&2; exit 2; }
rm -rf .gpu
mkdir -p .gpu/bin .gpu/lib
cp "${bins[@]}" "$module" .gpu/bin/
# The libraries to carry: what ldd resolves outside torch's and NVIDIA's wheels and the CUDA
# toolkit (the GPU machine's torch brings its own CUDA runtime, which must be the one loaded),
# less the C library, the C++ runtime and the loader (the GPU machine's own are newer, and
# compatible).
skip='/(torch|nvidia|cuda[^/]*)/|/(libc|libm|libdl|librt|libpthread|libutil|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda[a-z]*|libnccl)\.so'
for b in "${bins[@]}" "$module"; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | grep -Ev "$skip" | while read -r lib; do
  cp -L "$lib" .gpu/lib/
done
# The scripts and the reference model travel with the working tree; the bundle records what
# it was built from.
git rev-parse HEAD >.gpu/commit
py=$(sed -n 's/^DAPPLE_PYTHON:[A-Z]*=//p' "$build/CMakeCache.txt")
"${py:-python3}" -c 'import torch; print(torch.__version__)' >.gpu/torch_version
ls .gpu/lib
size=$(du -sk .gpu | cut -f1)
echo "gpu_bundle: .gpu holds $(find .gpu/bin -type f | wc -l) programs (and the CUDA module) and $(find .gpu/lib -type f | wc -l) libraries, $((size / 1024)) MiB (limit 64 MiB with the working tree)"
[ "$size" -lt $((60 * 1024)) ] || { echo "gpu_bundle: too large for the device tool" >&2; exit 1; }
