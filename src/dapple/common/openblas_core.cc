#include "dapple/common/openblas_core.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace dapple {
namespace {

// The value of the first line that starts with `key` (after its colon), padded with spaces
// for whole-word search; "" when there is none.
std::string Field(const std::string& cpuinfo, const std::string& key) {
  std::istringstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    return colon == std::string::npos ? "" : line.substr(colon + 1) + " ";
  }
  return "";
}

bool HasWord(const std::string& padded, const std::string& word) {
  return padded.find(" " + word + " ") != std::string::npos;
}

}  // namespace

std::string OpenBlasCoreTypeFor(const std::string& cpuinfo) {
  const std::string flags = Field(cpuinfo, "flags");
  const bool avx2 = HasWord(flags, "avx2"), avx512 = HasWord(flags, "avx512f");
  if (avx2 && HasWord(Field(cpuinfo, "vendor_id"), "AuthenticAMD")) return "Haswell";
  if (avx512) return "SkylakeX";
  return avx2 ? "Haswell" : "";
}

std::string OpenBlasCoreTypeForThisCpu() {
  std::ifstream in("/proc/cpuinfo", std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return OpenBlasCoreTypeFor(s.str());
}

void SetOpenBlasCoreTypeIfUnset() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  std::string t = OpenBlasCoreTypeForThisCpu();
  if (!t.empty()) setenv("OPENBLAS_CORETYPE", t.c_str(), 0);
}

}  // namespace dapple
