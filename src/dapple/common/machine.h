// This machine as dapple's caches and profiles name it: its identity (CPU, cores, memory,
// host, machine id), the threads each of N training processes gets on it, and the folder
// of dapple's per-user caches. Torch-free: `plan` and `simulate` use it.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

namespace dapple {

// What makes a calibration or a profile of one machine valid on another: a cached `local`
// calibration is used only while every field still matches.
struct MachineIdentity {
  std::string cpu;          // "AMD EPYC 9654 96-Core Processor" (/proc/cpuinfo model name)
  int cores = 0;            // online logical cores
  double memory_bytes = 0;  // physical memory
  std::string hostname;
  std::string machine_id;  // /etc/machine-id; "" when absent

  // The first field that differs ("cores 2 -> 4"), or nullopt when none does.
  std::optional<std::string> DifferenceTo(const MachineIdentity& now) const;
  // "AMD EPYC 9654 96-Core Processor, 2 cores, 8.0 GB, host h1".
  std::string Describe() const;
};

// The identity of the machine this runs on (DAPPLE_HOST overrides the host name, as for
// `dapple calibrate`).
MachineIdentity ThisMachine();

// How many cores were busy (user, system, interrupts, stolen) over `window`, from two reads
// of /proc/stat: 1.5 on a 2-core machine whose cores ran 75% of the time. Unlike the load
// average, which lags by a minute (a build that just ended still shows), it says what the
// cores do now. nullopt where /proc/stat cannot be read.
std::optional<double> BusyCores(std::chrono::milliseconds window);

// Compute threads of each of `processes` training processes on a machine of `cores`
// cores, as `dapple train`'s launcher gives them (OMP_NUM_THREADS): max(1, cores /
// processes). REQUIRES: processes >= 1.
int ThreadsPerProcess(int cores, int processes);

// dapple's per-user cache folder: $DAPPLE_CACHE_DIR, else $XDG_CACHE_HOME/dapple, else
// ~/.cache/dapple, else <tmp>/dapple-cache. Not created here.
std::filesystem::path DappleCacheDir();

}  // namespace dapple
