#!/usr/bin/env bash
# Runs each fuzz target for SECONDS (default 60) with the shipped profiles and the JSON seeds
# as seed corpus. Build first:
#   cmake -G Ninja -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DDAPPLE_BUILD_FUZZERS=ON \
#     -DDAPPLE_WITH_TORCH=OFF -DDAPPLE_BUILD_TESTS=OFF -DDAPPLE_BUILD_BENCHMARKS=OFF
#   ninja -C build-fuzz -j2 pipedream_fuzz json_formats_fuzz
# Crashes are written to build-fuzz/crashes/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build-fuzz}"
seconds="${1:-60}"
work="$build/fuzz-corpus"
mkdir -p "$work/pipedream" "$work/json" "$build/crashes"
for dir in dapple pipedream; do  # both folders have a vgg16.txt: prefix the folder
  for f in "$root"/data/profiles/$dir/*.txt; do
    [[ $(basename "$f") == LICENSE* ]] || cp "$f" "$work/pipedream/$dir-$(basename "$f")"
  done
done
cp "$root"/fuzz/seeds/json/*.json "$work/json/"
status=0
for target in pipedream json_formats; do
  corpus="$work/pipedream"
  [[ $target == json_formats ]] && corpus="$work/json"
  "$build/fuzz/${target}_fuzz" -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$build/crashes/${target}-" "$corpus" || status=$?
done
exit $status
