// How a batch is cut (docs/design.md section 1): a global batch into M micro-batches of m
// samples, and a micro-batch into r contiguous replica slices. Shared by the cost model,
// the simulator and the runtime so all three cut identically.
#pragma once

#include <cstdint>

namespace dapple {

// Half-open sample range [begin, end).
struct SampleRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Slice `part` of `n` samples cut into `parts` contiguous slices whose sizes differ by at
// most one (the first n % parts slices get one more). REQUIRES: 0 <= part < parts.
inline SampleRange SliceOf(int64_t n, int parts, int part) {
  int64_t base = n / parts, extra = n % parts;
  int64_t begin = part * base + (part < extra ? part : extra);
  return {begin, begin + base + (part < extra ? 1 : 0)};
}

// Samples of both ranges.
inline int64_t Overlap(SampleRange a, SampleRange b) {
  int64_t lo = a.begin > b.begin ? a.begin : b.begin;
  int64_t hi = a.end < b.end ? a.end : b.end;
  return hi > lo ? hi - lo : 0;
}

}  // namespace dapple
