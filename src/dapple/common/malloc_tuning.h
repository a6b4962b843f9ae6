// Steady allocation costs for timing work (profile, train, calibrate): glibc's malloc keeps
// freed memory instead of giving it back to the kernel between allocations.
#pragma once

namespace dapple {

// Note [Freed memory stays]: libtorch allocates tensors with malloc. By default glibc serves
// an allocation of several MiB with mmap, or trims the heap once its top is free, so the next
// allocation of the same size faults its pages in again (about 1-2 ms per 4 MiB here). Which
// allocations hit that depends on the heap's history, not on the work: `dapple profile`
// measured the backward of one of three identical 1024x1024 layers 2x slower than the others,
// the same layer every run. Raising the mmap and trim thresholds makes freed blocks reusable
// and the times smooth. Settings given by the user through the MALLOC_MMAP_THRESHOLD_,
// MALLOC_TRIM_THRESHOLD_ and MALLOC_TOP_PAD_ variables are kept. Call before the work.
void KeepFreedMemoryForReuse();

}  // namespace dapple
