// Counts the bytes of CPU tensor memory alive, by wrapping libtorch's CPU allocator. The
// profiler uses it to measure what a layer's forward leaves allocated for its backward.
#pragma once

#include <cstdint>

namespace c10 {
struct Allocator;
}

namespace dapple {

// While alive, every CPU tensor allocation goes through a counting wrapper of the previous
// allocator. Memory allocated before is not counted (its frees are not seen either).
// Not reentrant: at most one instance at a time. Thread-safe counters.
class ScopedAllocationCounter {
 public:
  ScopedAllocationCounter();
  ~ScopedAllocationCounter();
  ScopedAllocationCounter(const ScopedAllocationCounter&) = delete;
  ScopedAllocationCounter& operator=(const ScopedAllocationCounter&) = delete;

  // Bytes allocated through the wrapper and not yet freed.
  int64_t live_bytes() const;

 private:
  c10::Allocator* previous_;
};

}  // namespace dapple
