#!/usr/bin/env bash
# Sets everything up and runs the tests: Debian packages, build, then ctest (unit, torch,
# dist labels). The README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j1 --timeout 900 "$@"
