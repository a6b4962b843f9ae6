// Steady allocation costs for timing work (profile, train, calibrate): glibc's malloc keeps
// freed memory instead of giving it back to the kernel between allocations.
#pragma once

#include <cstdint>

namespace dapple {

// Note [Freed memory stays]: libtorch allocates tensors with malloc. By default glibc serves
// an allocation of several MiB with mmap, or trims the heap once its top is free, so the next
// allocation of the same size faults its pages in again. Which allocations hit that depends on
// the heap's history, not on the work, so identical layers profile at different times. Raising the
// mmap and trim thresholds makes freed blocks reusable and the times smooth. Settings given by the
// user through the MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ and MALLOC_TOP_PAD_ variables are
// kept. Call before the work.
void KeepFreedMemoryForReuse();

// Hands the memory that malloc keeps free back to the kernel (glibc's malloc_trim: the heap's
// top and the free pages inside it), so that the resident memory measured next is what the
// process holds, not what it freed (Note [Process memory] in format/cluster.h). Does nothing
// without glibc.
void ReturnFreedMemory();

// Note [Freed memory between steps]: with the settings above, the blocks a training step
// frees (weight-gradient temporaries of several sizes, message buffers, activations) stay
// resident, and the small allocations of later steps split them, so a rank's resident memory
// grew over the steps well beyond what any one step holds. Handing the freed memory back
// after every step bounds that, but the next step then faults its pages in again and runs
// slower. So a rank hands it
// back after its first step (what building the stage and the data left) and then only when
// its resident memory at a step's end has grown more than `slack_bytes` above the least seen
// at a step's end: one step's faults per `slack_bytes` of growth. A training rank allows
// kTrainingFreedMemorySlackBytes, and `dapple calibrate` counts that much in the process's
// own memory (Note [Process memory] in format/cluster.h): about what a rank's peak resident
// memory grows after its first step before it stays.
inline constexpr int64_t kTrainingFreedMemorySlackBytes = int64_t{16} << 20;
class FreedMemoryBound {
 public:
  explicit FreedMemoryBound(int64_t slack_bytes) : slack_(slack_bytes) {}
  // Call at the end of every step.
  void AfterStep();

 private:
  int64_t slack_;
  int64_t steps_ = 0;
  int64_t least_ = -1;  // resident bytes at a step's end, the least so far; -1: none yet
};

}  // namespace dapple
