// PeakResidentBytes: see process_memory.h.
#include "dapple/common/process_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace dapple {

namespace {

// The value of a "Name:   N kB" line of /proc/self/status, in bytes.
int64_t StatusBytes(const std::string& name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0) continue;
    std::istringstream fields(line.substr(name.size()));
    int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace

int64_t PeakResidentBytes() { return StatusBytes("VmHWM:"); }

int64_t ResidentBytes() { return StatusBytes("VmRSS:"); }

}  // namespace dapple
