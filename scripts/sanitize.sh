#!/usr/bin/env bash
# Builds the torch-free layers (common, format, cost, schedule, sim, plan, the dapple tool)
# with AddressSanitizer and UndefinedBehaviorSanitizer into build-asan/ and runs their unit
# tests (ctest -L unit). Any sanitizer report fails the run. .ci/run calls it.
# Environment: JOBS (default: nproc), BUILD_DIR (default: build-asan), CXX (the compiler;
# default cmake's choice). Extra arguments go to ctest, e.g. scripts/sanitize.sh -R Split
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build-asan}"
jobs="${JOBS:-$(nproc)}"
# -O1 -g1: what the sanitizers' own docs advise; it compiles 2.7x faster than -O2 -g here.
# A new folder compiles in batches of files (Note [Unity builds] in CMakeLists.txt).
unity=()
[ -f "$build/CMakeCache.txt" ] || unity=(-DDAPPLE_UNITY=ON)
cmake -G Ninja -S . -B "$build" "${unity[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DDAPPLE_SANITIZE=ON \
  -DDAPPLE_WITH_TORCH=OFF -DDAPPLE_BUILD_TESTS=ON -DDAPPLE_BUILD_BENCHMARKS=OFF \
  -DDAPPLE_BUILD_FUZZERS=OFF >/dev/null
ninja -C "$build" -j"$jobs"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_stack_use_after_return=1:strict_string_checks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
cd "$build"
ctest --output-on-failure -j"$jobs" -L unit "$@"
