#!/usr/bin/env bash
# Configures and builds dapple into build/ (Release with debug info, Ninja, ccache).
# Extra arguments go to cmake, e.g. scripts/build.sh -DDAPPLE_WITH_TORCH=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
ninja -C build -j"$jobs"
