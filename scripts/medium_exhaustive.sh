#!/bin/sh
# The DAPPLE planner against the exhaustive optimum on seeded random medium problems (10-12
# layers on 2 servers of 5 or 6 devices, GBS 24-72; fake costs, the analytic model, mixed
# devices with the slow server listed first and with the fast one first):
# tests/plan/medium_exhaustive_test.cc on SEEDS seeds of each kind instead of the
# few of a test run, on problems of LAYERS layers (DAPPLE_MEDIUM_LAYERS; the test's own run
# has 10). Prints each problem outside 2% and each kind's share within 2%. Minutes: the
# exhaustive search takes up to 15 s a problem at 10 layers, a minute at 11, 2 at 12.
#
#   scripts/medium_exhaustive.sh [SEEDS (default 20)] [BUILD_DIR (default build-notorch)] [LAYERS (default 10)]
set -e
seeds=${1:-20}
build=${2:-build-notorch}
layers=${3:-10}
DAPPLE_MEDIUM_SEEDS=$seeds DAPPLE_MEDIUM_LAYERS=$layers "$build/tests/plan_tests" \
  --gtest_filter='MediumExhaustive.*' | grep -E 'within|ratio|OK|FAILED' || true
