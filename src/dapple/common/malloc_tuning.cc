#include "dapple/common/malloc_tuning.h"

#include <algorithm>
#include <cstdlib>

#include "dapple/common/process_memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace dapple {

void KeepFreedMemoryForReuse() {
#if defined(__GLIBC__)
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit (HEAP_MAX_SIZE / 2).
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 32 << 20);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (!std::getenv("MALLOC_TOP_PAD_")) mallopt(M_TOP_PAD, 64 << 20);
#endif
}

void ReturnFreedMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

void FreedMemoryBound::AfterStep() {
  ++steps_;
  if (steps_ == 1) {  // what building the stage and the data left
    ReturnFreedMemory();
    return;
  }
  // Measured before any hand-back of this step: after one, the next step faults its pages
  // in again and ends near the least again.
  const int64_t now = ResidentBytes();
  if (least_ >= 0 && now > least_ + slack_) {
    ReturnFreedMemory();
    return;
  }
  least_ = least_ < 0 ? now : std::min(least_, now);
}

}  // namespace dapple
