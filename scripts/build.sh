#!/usr/bin/env bash
# Configures and builds dapple into build/ (Release, Ninja, ccache).
# Extra arguments go to cmake, e.g. scripts/build.sh -DDAPPLE_WITH_TORCH=OFF, or
# scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo for debug info (a third slower to build:
# libtorch's headers make every object's debug info large).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C build -j"$jobs"
