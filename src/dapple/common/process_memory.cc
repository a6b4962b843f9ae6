// PeakResidentBytes: see process_memory.h.
#include "dapple/common/process_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace dapple {

int64_t PeakResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace dapple
