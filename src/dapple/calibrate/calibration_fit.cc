// The pure parts of calibration: the latency/bandwidth fit, ranks to servers, size sweeps,
// and the JSON and text forms of a result.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "dapple/calibrate/calibration.h"
#include "dapple/calibrate/calibration_steps.h"
#include "dapple/calibrate/server_speeds.h"
#include "dapple/common/error.h"

namespace dapple {
namespace {

nlohmann::ordered_json SamplesJson(const std::vector<TimingSample>& samples, const char* key) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const TimingSample& s : samples) a.push_back({{"bytes", s.bytes}, {key, s.seconds}});
  return a;
}

nlohmann::ordered_json FitJson(const LinkFit& f, const char* key) {
  return {{"latency_s", f.latency_s},
          {"bandwidth_bytes_per_s", f.bandwidth_bytes_per_s},
          {"max_relative_error", f.max_relative_error},
          {"samples", SamplesJson(f.samples, key)}};
}

}  // namespace

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

std::string CalibrationToJsonText(const CalibrationResult& r) {
  auto root = nlohmann::ordered_json::parse(ClusterToJsonText(r.cluster));
  nlohmann::ordered_json c;
  c["tool"] = "dapple calibrate";
  c["note"] =
      "point-to-point samples are one-way times (half the fastest of the repeated round "
      "trips); allreduce samples are the mean seconds per float32 sum over the ranks listed; "
      "bus bandwidth = 2(r-1)/r x bytes / time (docs/design.md section 4)";
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (size_t i = 0; i < r.hosts.size(); ++i) {
    ranks.push_back({{"rank", i}, {"host", r.hosts[i]}, {"server", r.server_of_rank[i]}});
    if (i < r.resident_bytes.size()) ranks.back()["resident_bytes"] = r.resident_bytes[i];
  }
  c["ranks"] = ranks;
  auto link = [&](const std::optional<std::pair<int, int>>& pair,
                  const std::optional<LinkFit>& fit) -> nlohmann::ordered_json {
    if (!pair || !fit) return nullptr;
    nlohmann::ordered_json j = {{"ranks", {pair->first, pair->second}}};
    j.update(FitJson(*fit, "one_way_s"));
    return j;
  };
  c["intra_server"] = link(r.intra_pair, r.intra);
  c["inter_server"] = link(r.inter_pair, r.inter);
  auto allreduce = [](const std::vector<int>& ranks, const std::vector<TimingSample>& samples,
                      const std::optional<AllReduceFit>& fit) {
    nlohmann::ordered_json ar = {{"ranks", ranks}, {"samples", SamplesJson(samples, "seconds")}};
    if (fit) {
      ar["bus_bandwidth_bytes_per_s"] = fit->bus_bandwidth_bytes_per_s;
      ar["step_latency_s"] = fit->step_latency_s;
      ar["max_relative_error"] = fit->fit.max_relative_error;
    }
    return ar;
  };
  std::vector<int> world(r.hosts.size());
  for (size_t i = 0; i < world.size(); ++i) world[i] = static_cast<int>(i);
  c["allreduce"] = allreduce(world, r.allreduce, r.allreduce_fit);
  c["intra_server_allreduce"] =
      r.intra_allreduce.empty()
          ? nlohmann::ordered_json(nullptr)
          : allreduce(r.intra_allreduce_ranks, r.intra_allreduce, r.intra_allreduce_fit);
  if (r.compute) {
    c["compute"] = {
        {"kernel", r.compute->kernel},
        {"iterations", r.compute->iterations},
        {"alone_s", r.compute->alone_s},
        {"together_s", r.compute->together_s},
        {"together_by_rank_s", r.compute->together_by_rank_s},
        {"speed", r.compute->speed},
        {"chunk_iterations", r.compute->chunk_iterations},
        {"cold_caches", r.compute->cold_caches},
        {"chunk_alone_s", r.compute->chunk_alone_s},
        {"chunk_ring_s", r.compute->chunk_ring_s},
        {"resume_s", r.compute->resume_s},
        {"delivery_s", r.compute->delivery_s},
        {"busy_tokens", r.compute->busy_tokens},
        {"busy_delivery_s", r.compute->busy_delivery_s},
        {"link_latency_s", r.compute->link_latency_s},
        {"wake_s", r.compute->wake_s},
        {"intra_stream_load", r.intra_stream_load ? nlohmann::ordered_json(*r.intra_stream_load)
                                                  : nlohmann::ordered_json(nullptr)},
        {"inter_stream_load", r.inter_stream_load ? nlohmann::ordered_json(*r.inter_stream_load)
                                                  : nlohmann::ordered_json(nullptr)},
        {"intra_allreduce_load",
         r.intra_allreduce_load
             ? nlohmann::ordered_json{{"ranks",
                                       {r.intra_allreduce_load->ranks.first,
                                        r.intra_allreduce_load->ranks.second}},
                                      {"computing", r.intra_allreduce_load->computing},
                                      {"bytes", r.intra_allreduce_load->bytes},
                                      {"alone_s", r.intra_allreduce_load->alone_s},
                                      {"loaded_s", r.intra_allreduce_load->loaded_s},
                                      {"compute_stretch", r.intra_allreduce_load->compute_stretch},
                                      {"load_per_rank", r.intra_allreduce_load->load_per_rank}}
             : nlohmann::ordered_json(nullptr)},
        {"one_machine", r.one_machine},
        {"note",
         "speed: the kernel's time on rank 0 alone over its mean time while every "
         "rank runs it; on one machine (one_machine: the ranks share a boot id) "
         "the cluster's emulation.shared_compute is speed x ranks and device.speed 1, else "
         "device.speed is speed; resume_s: a chunk of the kernel in a token ring "
         "(one rank computing at a time) minus the same chunk alone, the cluster's "
         "emulation.resume_s on one machine; wake_s: the mean send-to-wake-up "
         "of a token in a ring with busy_tokens tokens (all ranks but the waiting "
         "one computing: busy_delivery_s; delivery_s with one token) minus the "
         "link's fitted latency (link_latency_s), the cluster's "
         "emulation.wake_s on one machine"}};
  }
  c["options"] = {{"repeats", r.options.repeats},
                  {"budget_s", r.options.budget.count() / 1000.0},
                  {"timeout_s", r.timeout_s},
                  {"min_fit_bytes", r.options.min_fit_bytes}};
  root["calibration"] = c;
  return root.dump(2) + "\n";
}

std::string CalibrationSummary(const CalibrationResult& r) {
  std::string s =
      fmt::format("cluster {}: {} server(s), devices", r.cluster.name, r.cluster.num_servers());
  for (const ServerSpec& sv : r.cluster.servers) s += fmt::format(" {}", sv.devices);
  s += fmt::format(
      ", {:.3g} GB memory per device ({:.0f} MiB of it the process's own), speed {:g}\n",
      r.cluster.device.memory_bytes / 1e9, r.cluster.device.process_memory_bytes / 1048576.0,
      r.cluster.device.speed);
  if (std::any_of(r.cluster.servers.begin(), r.cluster.servers.end(),
                  [](const ServerSpec& sv) { return sv.device.has_value(); })) {
    s += "speed per server (Note [Per-server speeds]):";
    for (int i = 0; i < r.cluster.num_servers(); ++i)
      s += fmt::format(" {:.3g}", r.cluster.Device(r.cluster.FirstDeviceOf(i)).speed);
    s += "\n";
  }
  auto link = [&](const char* name, const std::optional<std::pair<int, int>>& pair,
                  const std::optional<LinkFit>& fit) {
    if (!pair || !fit) {
      s += fmt::format("{}: not measured\n", name);
      return;
    }
    s += fmt::format(
        "{} (ranks {} <-> {}): latency {:.1f} us, bandwidth {:.1f} MB/s ({:.3f} Gbit/s), "
        "fit within {:.0f}%\n",
        name, pair->first, pair->second, fit->latency_s * 1e6, fit->bandwidth_bytes_per_s / 1e6,
        fit->bandwidth_bytes_per_s * 8 / 1e9, fit->max_relative_error * 100);
    for (const TimingSample& t : fit->samples)
      s += fmt::format("  {:>10}  {:10.1f} us  {:9.1f} MB/s\n", internal::ByteSize(t.bytes),
                       t.seconds * 1e6, t.bytes / t.seconds / 1e6);
  };
  link("intra-server", r.intra_pair, r.intra);
  link("inter-server", r.inter_pair, r.inter);
  auto allreduce = [&](const std::string& name, const std::vector<TimingSample>& samples,
                       const std::optional<AllReduceFit>& fit) {
    s += fmt::format("{}", name);
    if (fit)
      s += fmt::format(": bus bandwidth {:.1f} MB/s, {:.1f} us per ring step",
                       fit->bus_bandwidth_bytes_per_s / 1e6, fit->step_latency_s * 1e6);
    s += "\n";
    for (const TimingSample& t : samples)
      s += fmt::format("  {:>10}  {:10.1f} us\n", internal::ByteSize(t.bytes), t.seconds * 1e6);
  };
  allreduce(fmt::format("allreduce over {} ranks", r.hosts.size()), r.allreduce, r.allreduce_fit);
  if (!r.intra_allreduce.empty())
    allreduce(fmt::format("allreduce inside server 0 ({} ranks)", r.intra_allreduce_ranks.size()),
              r.intra_allreduce, r.intra_allreduce_fit);
  if (r.compute) {
    s += fmt::format(
        "compute speed {:.3f}: {} x {} takes {:.1f} ms on rank 0 alone, {:.1f} ms while every "
        "rank runs it\n",
        r.compute->speed, r.compute->iterations, r.compute->kernel, r.compute->alone_s * 1e3,
        r.compute->together_s * 1e3);
    const std::optional<Emulation>& emulation = r.cluster.emulation;
    if (emulation)
      s += fmt::format(
          "one machine: the devices share the compute of {:.2f} devices (emulation."
          "shared_compute); a compute after idle time takes {:.0f} us more ({} x the kernel: "
          "{:.2f} ms alone, {:.2f} ms in a token ring; emulation.resume_s)\n",
          emulation->shared_compute, r.compute->resume_s * 1e6, r.compute->chunk_iterations,
          r.compute->chunk_alone_s * 1e3, r.compute->chunk_ring_s * 1e3);
    if (r.one_machine && r.compute->together_by_rank_s.size() >= 2) {
      const std::vector<double>& t = r.compute->together_by_rank_s;
      const auto [fast, slow] = std::minmax_element(t.begin(), t.end());
      if (*slow > *fast * kUnalikeCoresRatio)
        s += fmt::format(
            "note: the ranks ran the loop up to {:.2f}x apart (rank {} {:.1f} ms, rank {} {:.1f} "
            "ms): this machine's cores are not alike; the slowest rank sets a step's pace, so "
            "`dapple profile` keeps the slowest device core's times (Note [Devices as cores]; "
            "not with DAPPLE_PIN_CORES=0)\n",
            *slow / *fast, slow - t.begin(), *slow * 1e3, fast - t.begin(), *fast * 1e3);
    }
    if (emulation && r.compute->busy_tokens > 0) {
      const ComputeSpeed& k = *r.compute;
      const std::string rings =
          k.busy_tokens > 1
              ? fmt::format(
                    "{:.2f} ms from send to wake-up with {} tokens in the ring while the "
                    "others compute, {:.2f} ms with one",
                    k.busy_delivery_s * 1e3, k.busy_tokens, k.delivery_s * 1e3)
              : fmt::format("{:.2f} ms from send to wake-up in a token ring", k.delivery_s * 1e3);
      s += fmt::format(
          "a rank that waits for a message wakes {:.0f} us after the link's latency ({}, "
          "latency {:.0f} us; emulation.wake_s)\n",
          emulation->wake_s * 1e6, rings, k.link_latency_s * 1e6);
    }
    if (emulation && (r.intra_stream_load || r.inter_stream_load))
      s += fmt::format(
          "a stream between two ranks takes the compute of {} devices from the shared cores "
          "(emulation.intra_server_stream_load, inter_server_stream_load)\n",
          r.intra_stream_load && r.inter_stream_load
              ? fmt::format("{:.2f} (intra-server), {:.2f} (inter-server)", *r.intra_stream_load,
                            *r.inter_stream_load)
              : fmt::format("{:.2f}",
                            r.intra_stream_load ? *r.intra_stream_load : *r.inter_stream_load));
    if (emulation && r.intra_allreduce_load) {
      const AllReduceLoad& l = *r.intra_allreduce_load;
      const double C = emulation->shared_compute;
      s += fmt::format(
          "an allreduce of {} between ranks {} and {} took {:.2f} ms alone and {:.2f} ms "
          "({:.2f}x) while the other {} ranks computed ({:.2f}x from sharing the cores); their "
          "loop ran {:.2f}x slower, as if it took {:.2f} devices per rank (recorded only, not "
          "used by the cost model: docs/two-server.md)\n",
          internal::ByteSize(l.bytes), l.ranks.first, l.ranks.second, l.alone_s * 1e3,
          l.loaded_s * 1e3, l.loaded_s / std::max(l.alone_s, 1e-12), l.computing,
          std::max(1.0, (l.computing + 2 * l.load_per_rank) / C), l.compute_stretch,
          l.load_per_rank);
    }
  }
  return s;
}

}  // namespace dapple
