#!/bin/sh
# The DAPPLE planner against the exhaustive optimum on seeded random medium problems (10
# layers on 2 servers of 5 or 6 devices, GBS 24-72; fake costs, the analytic model, mixed
# devices): tests/plan/medium_exhaustive_test.cc on SEEDS seeds of each kind instead of the
# few of a test run. Prints each problem outside 2% and each kind's share within 2%.
# Minutes: the exhaustive search takes 1-15 s a problem.
#
#   scripts/medium_exhaustive.sh [SEEDS (default 20)] [BUILD_DIR (default build-notorch)]
set -e
seeds=${1:-20}
build=${2:-build-notorch}
DAPPLE_MEDIUM_SEEDS=$seeds "$build/tests/plan_tests" --gtest_filter='MediumExhaustive.*' |
  grep -E 'within|ratio|OK|FAILED' || true
