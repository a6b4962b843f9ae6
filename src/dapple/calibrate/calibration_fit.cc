// The pure parts of calibration: the latency/bandwidth fit, ranks to servers, size sweeps
// (the JSON and text forms of a result: calibration_report.cc).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include "dapple/calibrate/calibration.h"
#include "dapple/calibrate/calibration_steps.h"
#include "dapple/calibrate/server_speeds.h"
#include "dapple/common/error.h"

namespace dapple {

LinkFit FitLatencyBandwidth(const std::vector<TimingSample>& samples, const std::string& what) {
  // Sizes in MB keep the sums well conditioned.
  constexpr double kUnit = 1e6;
  for (const TimingSample& s : samples) {
    if (!(s.seconds > 0) || !std::isfinite(s.seconds) || !(s.bytes >= 0))
      ThrowInput("{}: invalid sample ({} bytes in {} s)", what, s.bytes, s.seconds);
  }
  std::vector<TimingSample> v = samples;
  std::stable_sort(v.begin(), v.end(),
                   [](const TimingSample& x, const TimingSample& y) { return x.bytes < y.bytes; });
  if (v.size() < 2 || !(v.back().bytes > v.front().bytes))
    ThrowInput("{}: need samples at two different sizes at least to fit latency and bandwidth",
               what);
  // The bandwidth-dominated sizes: the top of the sweep (bytes >= largest / 64), at least
  // two distinct sizes.
  const double max_x = v.back().bytes;
  size_t first_large = v.size();
  while (first_large > 0 && v[first_large - 1].bytes >= max_x / 64) --first_large;
  while (first_large > 0 && v[first_large].bytes == max_x) --first_large;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = first_large; i < v.size(); ++i) {
    double x = v[i].bytes / kUnit, t = v[i].seconds;
    n += 1;
    sx += x;
    sy += t;
    sxx += x * x;
    sxy += x * t;
  }
  double b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  double a = (sy - b * sx) / n;
  if (first_large > 0 && b > 0) {
    // The latency: least squares intercept, at slope b, over the latency-dominated small
    // sizes (transfer at most half the time); a token bucket lets a message that fits in
    // its burst through faster than the rate, which would drag the intercept below zero.
    double sum = 0, count = 0;
    for (size_t i = 0; i < first_large; ++i) {
      double transfer = b * v[i].bytes / kUnit;
      if (transfer > 0.5 * v[i].seconds) continue;
      sum += v[i].seconds - transfer;
      count += 1;
    }
    a = count > 0 ? sum / count : v[0].seconds - b * v[0].bytes / kUnit;
  }
  if (a < 0) {  // no negative latency
    a = 0;
    if (first_large == 0) b = sxy / sxx;
  }
  if (!(b > 0) || !std::isfinite(b))
    ThrowInput(
        "{}: the time does not grow with the message size (from {} to {}): the bandwidth "
        "cannot be measured; measure larger sizes",
        what, internal::ByteSize(v[first_large].bytes), internal::ByteSize(max_x));
  LinkFit f;
  f.latency_s = a;
  f.bandwidth_bytes_per_s = kUnit / b;
  f.samples = samples;
  for (const TimingSample& s : samples) {
    double t = a + b * s.bytes / kUnit;
    f.max_relative_error = std::max(f.max_relative_error, std::abs(t - s.seconds) / s.seconds);
  }
  return f;
}

AllReduceFit FitAllReduce(const std::vector<TimingSample>& samples, int ranks,
                          const std::string& what) {
  DAPPLE_CHECK(ranks >= 2);
  const double sent = 2.0 * (ranks - 1) / ranks;  // bytes each rank sends per byte reduced
  std::vector<TimingSample> v;
  for (const TimingSample& t : samples) v.push_back({t.bytes * sent, t.seconds});
  AllReduceFit f;
  f.ranks = ranks;
  f.fit = FitLatencyBandwidth(v, what);
  f.bus_bandwidth_bytes_per_s = f.fit.bandwidth_bytes_per_s;
  f.step_latency_s = f.fit.latency_s / (2.0 * (ranks - 1));
  return f;
}

std::vector<int> ServersOfRanks(const std::vector<std::string>& hosts) {
  std::map<std::string, int> server;  // host -> server id
  std::map<std::string, int> last;    // host -> its last rank so far
  std::vector<int> out;
  for (int r = 0; r < static_cast<int>(hosts.size()); ++r) {
    const std::string& h = hosts[r];
    if (h.empty()) ThrowInput("rank {}: reported an empty host name (set DAPPLE_HOST)", r);
    auto it = server.find(h);
    if (it == server.end()) {
      it = server.emplace(h, static_cast<int>(server.size())).first;
    } else if (last[h] != r - 1) {
      ThrowInput(
          "host {}: ranks {} and {} run on it but rank {} does not: launch the ranks of one "
          "server with consecutive RANK values (devices are numbered server by server)",
          h, last[h], r, r - 1);
    }
    last[h] = r;
    out.push_back(it->second);
  }
  return out;
}

std::string CalibrationHostName() {
  if (const char* h = std::getenv("DAPPLE_HOST"); h && *h) return h;
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

double PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  DAPPLE_CHECK(pages > 0 && page > 0, "sysconf cannot tell the physical memory");
  return static_cast<double>(pages) * static_cast<double>(page);
}

std::string MachineBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

std::vector<int64_t> SizeSweep(int64_t min_bytes, int64_t max_bytes) {
  DAPPLE_CHECK(min_bytes >= 1 && max_bytes >= min_bytes);
  std::vector<int64_t> v;
  for (int64_t s = min_bytes; s <= max_bytes; s *= 4) {
    v.push_back(s);
    if (s > max_bytes / 4) break;
  }
  return v;
}

}  // namespace dapple
