// Note [Devices as cores]: on a machine where each emulated device is a set of cores, which
// cores a device gets matters. The cores of a virtual machine need not be alike (one may
// run the same loop much slower than another, and which one changes over time), and a process the
// kernel moves between cores runs at whichever speed it lands on. So dapple's launcher pins local
// rank i to the i-th set of cores it allows, and the profiler times each layer on every device's
// cores and keeps the slowest (profiler.h): synchronous data parallelism and a balanced pipeline
// run at the pace of their slowest device. Pinning applies only when the processes' threads fit the
// allowed cores without sharing; DAPPLE_PIN_CORES=0 turns it off. Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dapple {

using CoreSet = std::vector<int>;

// The cores this process may run on (sched_getaffinity), ascending; empty when unknown.
CoreSet AllowedCores();

// False when DAPPLE_PIN_CORES is "0" (or "off", "false", "no").
bool CorePinningEnabled();

// The core sets of `processes` processes of `threads` threads each, from `allowed`:
// process i gets allowed[i*threads .. (i+1)*threads). nullopt when they do not fit
// (processes * threads > allowed.size()), so that processes sharing cores stay unpinned.
// REQUIRES: processes >= 1, threads >= 1.
std::optional<std::vector<CoreSet>> SplitCores(const CoreSet& allowed, int processes, int threads);

// SplitCores(AllowedCores(), ...), or nullopt when CorePinningEnabled() is false.
std::optional<std::vector<CoreSet>> DeviceCoreSets(int processes, int threads);

// Restricts the calling thread (threads it starts later inherit it) to `cores`. False when
// the kernel refuses (e.g. a core outside the process's cpuset).
bool PinCallingThread(const CoreSet& cores);

// "0-3,6" style list of a core set, as taskset prints it.
std::string FormatCores(const CoreSet& cores);

// The sets of several devices, "0-1 | 2-3".
std::string FormatCoreSets(const std::vector<CoreSet>& sets);

}  // namespace dapple
