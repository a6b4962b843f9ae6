// MachineIdentity from /proc, sysconf and the host name; the cache folder.
#include "dapple/common/machine.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

namespace dapple {
namespace {

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    auto start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "unknown cpu";
}

}  // namespace

std::optional<std::string> MachineIdentity::DifferenceTo(const MachineIdentity& now) const {
  if (cpu != now.cpu) return fmt::format("cpu '{}' -> '{}'", cpu, now.cpu);
  if (cores != now.cores) return fmt::format("cores {} -> {}", cores, now.cores);
  // Memory as the kernel reports it moves by a few MB between boots: 1% is a change.
  if (std::abs(memory_bytes - now.memory_bytes) > 0.01 * std::max(memory_bytes, now.memory_bytes))
    return fmt::format("memory {:.1f} GB -> {:.1f} GB", memory_bytes / 1e9, now.memory_bytes / 1e9);
  if (hostname != now.hostname) return fmt::format("host '{}' -> '{}'", hostname, now.hostname);
  if (machine_id != now.machine_id)
    return fmt::format("machine id '{}' -> '{}'", machine_id, now.machine_id);
  return std::nullopt;
}

std::string MachineIdentity::Describe() const {
  return fmt::format("{}, {} cores, {:.1f} GB, host {}", cpu, cores, memory_bytes / 1e9, hostname);
}

MachineIdentity ThisMachine() {
  MachineIdentity m;
  m.cpu = CpuModel();
  m.cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  m.memory_bytes = pages > 0 && page_size > 0 ? static_cast<double>(pages) * page_size : 0;
  if (const char* h = std::getenv("DAPPLE_HOST"); h && *h) {
    m.hostname = h;
  } else {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) == 0) m.hostname = buf;
  }
  m.machine_id = ReadFirstLine("/etc/machine-id");
  return m;
}

namespace {

// The aggregate "cpu" line of /proc/stat: busy and total jiffies (idle and iowait are idle).
std::optional<std::pair<double, double>> CpuJiffies() {
  std::istringstream in(ReadFirstLine("/proc/stat"));
  std::string label;
  in >> label;
  if (label != "cpu") return std::nullopt;
  double v[8] = {};
  for (double& x : v)
    if (!(in >> x)) return std::nullopt;
  // user nice system idle iowait irq softirq steal
  const double idle = v[3] + v[4], total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
  return std::make_pair(total - idle, total);
}

}  // namespace

std::optional<double> BusyCores(std::chrono::milliseconds window) {
  const auto before = CpuJiffies();
  std::this_thread::sleep_for(window);
  const auto after = CpuJiffies();
  if (!before || !after || after->second <= before->second) return std::nullopt;
  const double share = (after->first - before->first) / (after->second - before->second);
  return share * static_cast<double>(ThisMachine().cores);
}

int ThreadsPerProcess(int cores, int processes) {
  return std::max(1, cores / std::max(1, processes));
}

std::filesystem::path DappleCacheDir() {
  if (const char* dir = std::getenv("DAPPLE_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::filesystem::path(xdg) / "dapple";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "dapple";
  return std::filesystem::temp_directory_path() / "dapple-cache";
}

}  // namespace dapple
