// Core sets of emulated devices (Note [Devices as cores] in core_sets.h).
#include "dapple/common/core_sets.h"

#include <fmt/format.h>
#include <sched.h>

#include <cstdlib>
#include <string_view>

#include "dapple/common/error.h"

namespace dapple {

CoreSet AllowedCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  CoreSet cores;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  return cores;
}

bool CorePinningEnabled() {
  const char* v = std::getenv("DAPPLE_PIN_CORES");
  if (!v) return true;
  std::string_view s(v);
  return !(s == "0" || s == "off" || s == "false" || s == "no");
}

std::optional<std::vector<CoreSet>> SplitCores(const CoreSet& allowed, int processes, int threads) {
  DAPPLE_CHECK(processes >= 1 && threads >= 1);
  if (static_cast<size_t>(processes) * static_cast<size_t>(threads) > allowed.size())
    return std::nullopt;
  std::vector<CoreSet> sets(processes);
  for (int p = 0; p < processes; ++p)
    sets[p].assign(allowed.begin() + p * threads, allowed.begin() + (p + 1) * threads);
  return sets;
}

std::optional<std::vector<CoreSet>> DeviceCoreSets(int processes, int threads) {
  if (!CorePinningEnabled()) return std::nullopt;
  return SplitCores(AllowedCores(), processes, threads);
}

bool PinCallingThread(const CoreSet& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return !cores.empty() && sched_setaffinity(0, sizeof(set), &set) == 0;
}

std::string FormatCores(const CoreSet& cores) {
  std::string out;
  for (size_t i = 0; i < cores.size();) {
    size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cores[i]) : fmt::format("{}-{}", cores[i], cores[j]);
    i = j + 1;
  }
  return out;
}

std::string FormatCoreSets(const std::vector<CoreSet>& sets) {
  std::string out;
  for (const CoreSet& set : sets) out += (out.empty() ? "" : " | ") + FormatCores(set);
  return out;
}

}  // namespace dapple
