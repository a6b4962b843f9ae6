#!/usr/bin/env bash
# Configures and builds dapple into build/ (Release at -O2, Ninja, ccache).
# DAPPLE_BUILD_TARGETS: the ninja targets (default: all; scripts/test.sh builds dapple_tests).
# Extra arguments go to cmake, e.g. scripts/build.sh -DDAPPLE_WITH_TORCH=OFF, or
# scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo for debug info (a third slower to build:
# libtorch's headers make every object's debug info large).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# -O2 rather than CMake's -O3 for Release: what the tests were always run at, and 7% less
# compile time per libtorch file.
# Note [Unity builds] (CMakeLists.txt): a new build folder compiles each target in batches of
# files, about half the time of a clean build on 2 cores; an existing one keeps its setting
# (-DDAPPLE_UNITY=OFF turns it off for editing one file at a time).
unity=()
[ -f build/CMakeCache.txt ] || unity=(-DDAPPLE_UNITY=ON)
cmake -G Ninja -S . -B build "${unity[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  "$@" >/dev/null
# shellcheck disable=SC2086  # a list of targets
ninja -C build -j"$jobs" ${DAPPLE_BUILD_TARGETS:-}
