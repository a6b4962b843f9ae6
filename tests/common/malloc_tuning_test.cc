// Note [Freed memory between steps]: FreedMemoryBound hands malloc's freed memory back to the
// kernel after the first step, keeps it while a step's end stays within the slack of the
// least seen, and hands it back once it grows beyond.
#include "dapple/common/malloc_tuning.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "dapple/common/process_memory.h"

namespace dapple {
namespace {

constexpr int64_t kMiB = 1 << 20;

// Allocates `blocks` blocks of 8 MiB (below the mmap threshold: from the heap), touches them
// and frees them: with KeepFreedMemoryForReuse, malloc keeps them resident.
void TouchAndFree(int blocks) {
  std::vector<void*> held;
  for (int i = 0; i < blocks; ++i) {
    held.push_back(std::malloc(8 * kMiB));
    std::memset(held.back(), 1, 8 * kMiB);
  }
  for (void* p : held) std::free(p);
}

TEST(FreedMemoryBound, HandsBackAfterTheFirstStepAndBeyondTheSlack) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "glibc's malloc only";
#endif
#if defined(DAPPLE_SANITIZED) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator is not glibc's malloc";
#endif
  if (ResidentBytes() == 0) GTEST_SKIP() << "no /proc/self/status";
  KeepFreedMemoryForReuse();
  FreedMemoryBound bound(16 * kMiB);
  TouchAndFree(6);  // 48 MiB freed, still resident
  int64_t before = ResidentBytes();
  bound.AfterStep();  // the first step: handed back
  EXPECT_LT(ResidentBytes(), before - 32 * kMiB);

  bound.AfterStep();  // the least so far
  TouchAndFree(1);    // 8 MiB: within the slack, kept
  before = ResidentBytes();
  bound.AfterStep();
  EXPECT_GT(ResidentBytes(), before - 4 * kMiB);

  TouchAndFree(4);  // 32 MiB above the least: handed back
  before = ResidentBytes();
  bound.AfterStep();
  EXPECT_LT(ResidentBytes(), before - 16 * kMiB);
}

}  // namespace
}  // namespace dapple
