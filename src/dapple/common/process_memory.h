// Memory of this process as the kernel counts it (Linux /proc/self/status).
#pragma once

#include <cstdint>

namespace dapple {

// Peak resident set size (VmHWM) in bytes; 0 where the kernel does not report it.
int64_t PeakResidentBytes();
// Resident set size now (VmRSS) in bytes; 0 where the kernel does not report it.
int64_t ResidentBytes();

}  // namespace dapple
