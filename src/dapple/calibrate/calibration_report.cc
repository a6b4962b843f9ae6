// The JSON and text forms of a calibration result (calibration.h).
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "dapple/calibrate/calibration.h"
#include "dapple/calibrate/calibration_steps.h"
#include "dapple/calibrate/server_speeds.h"

namespace dapple {
namespace {

using OJson = nlohmann::ordered_json;

OJson SamplesJson(const std::vector<TimingSample>& samples, const char* key) {
  OJson a = OJson::array();
  for (const TimingSample& s : samples) a.push_back({{"bytes", s.bytes}, {key, s.seconds}});
  return a;
}

OJson FitJson(const LinkFit& f, const char* key) {
  return {{"latency_s", f.latency_s},
          {"bandwidth_bytes_per_s", f.bandwidth_bytes_per_s},
          {"max_relative_error", f.max_relative_error},
          {"samples", SamplesJson(f.samples, key)}};
}

OJson RanksJson(const CalibrationResult& r) {
  OJson ranks = OJson::array();
  for (size_t i = 0; i < r.hosts.size(); ++i) {
    ranks.push_back({{"rank", i}, {"host", r.hosts[i]}, {"server", r.server_of_rank[i]}});
    if (i < r.resident_bytes.size()) ranks.back()["resident_bytes"] = r.resident_bytes[i];
  }
  return ranks;
}

OJson LinkJson(const std::optional<std::pair<int, int>>& pair, const std::optional<LinkFit>& fit) {
  if (!pair || !fit) return nullptr;
  OJson j = {{"ranks", {pair->first, pair->second}}};
  j.update(FitJson(*fit, "one_way_s"));
  return j;
}

OJson AllReduceJson(const std::vector<int>& ranks, const std::vector<TimingSample>& samples,
                    const std::optional<AllReduceFit>& fit) {
  OJson ar = {{"ranks", ranks}, {"samples", SamplesJson(samples, "seconds")}};
  if (fit) {
    ar["bus_bandwidth_bytes_per_s"] = fit->bus_bandwidth_bytes_per_s;
    ar["step_latency_s"] = fit->step_latency_s;
    ar["max_relative_error"] = fit->fit.max_relative_error;
  }
  return ar;
}

OJson OptionalJson(const std::optional<double>& v) { return v ? OJson(*v) : OJson(nullptr); }

OJson AllReduceLoadJson(const std::optional<AllReduceLoad>& l) {
  if (!l) return nullptr;
  return {{"ranks", {l->ranks.first, l->ranks.second}},
          {"computing", l->computing},
          {"bytes", l->bytes},
          {"alone_s", l->alone_s},
          {"loaded_s", l->loaded_s},
          {"compute_stretch", l->compute_stretch},
          {"load_per_rank", l->load_per_rank}};
}

OJson ComputeJson(const CalibrationResult& r) {
  const ComputeSpeed& k = *r.compute;
  return {{"kernel", k.kernel},
          {"iterations", k.iterations},
          {"alone_s", k.alone_s},
          {"together_s", k.together_s},
          {"together_by_rank_s", k.together_by_rank_s},
          {"speed", k.speed},
          {"chunk_iterations", k.chunk_iterations},
          {"cold_caches", k.cold_caches},
          {"chunk_alone_s", k.chunk_alone_s},
          {"chunk_ring_s", k.chunk_ring_s},
          {"resume_s", k.resume_s},
          {"delivery_s", k.delivery_s},
          {"busy_tokens", k.busy_tokens},
          {"busy_delivery_s", k.busy_delivery_s},
          {"link_latency_s", k.link_latency_s},
          {"wake_s", k.wake_s},
          {"intra_stream_load", OptionalJson(r.intra_stream_load)},
          {"inter_stream_load", OptionalJson(r.inter_stream_load)},
          {"intra_allreduce_load", AllReduceLoadJson(r.intra_allreduce_load)},
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

std::string DevicesSummary(const Cluster& c) {
  std::string s = fmt::format("cluster {}: {} server(s), devices", c.name, c.num_servers());
  for (const ServerSpec& sv : c.servers) s += fmt::format(" {}", sv.devices);
  s += fmt::format(
      ", {:.3g} GB memory per device ({:.0f} MiB of it the process's own), speed {:g}\n",
      c.device.memory_bytes / 1e9, c.device.process_memory_bytes / 1048576.0, c.device.speed);
  if (std::any_of(c.servers.begin(), c.servers.end(),
                  [](const ServerSpec& sv) { return sv.device.has_value(); })) {
    s += "speed per server (Note [Per-server speeds]):";
    for (int i = 0; i < c.num_servers(); ++i)
      s += fmt::format(" {:.3g}", c.Device(c.FirstDeviceOf(i)).speed);
    s += "\n";
  }
  return s;
}

std::string LinkSummary(const char* name, const std::optional<std::pair<int, int>>& pair,
                        const std::optional<LinkFit>& fit) {
  if (!pair || !fit) return fmt::format("{}: not measured\n", name);
  std::string s = fmt::format(
      "{} (ranks {} <-> {}): latency {:.1f} us, bandwidth {:.1f} MB/s ({:.3f} Gbit/s), "
      "fit within {:.0f}%\n",
      name, pair->first, pair->second, fit->latency_s * 1e6, fit->bandwidth_bytes_per_s / 1e6,
      fit->bandwidth_bytes_per_s * 8 / 1e9, fit->max_relative_error * 100);
  for (const TimingSample& t : fit->samples)
    s += fmt::format("  {:>10}  {:10.1f} us  {:9.1f} MB/s\n", internal::ByteSize(t.bytes),
                     t.seconds * 1e6, t.bytes / t.seconds / 1e6);
  return s;
}

std::string AllReduceSummary(const std::string& name, const std::vector<TimingSample>& samples,
                             const std::optional<AllReduceFit>& fit) {
  std::string s = name;
  if (fit)
    s += fmt::format(": bus bandwidth {:.1f} MB/s, {:.1f} us per ring step",
                     fit->bus_bandwidth_bytes_per_s / 1e6, fit->step_latency_s * 1e6);
  s += "\n";
  for (const TimingSample& t : samples)
    s += fmt::format("  {:>10}  {:10.1f} us\n", internal::ByteSize(t.bytes), t.seconds * 1e6);
  return s;
}

// The compute speed, the shared compute of one machine, and cores that are not alike.
std::string ComputeSummary(const CalibrationResult& r) {
  const ComputeSpeed& k = *r.compute;
  std::string s = fmt::format(
      "compute speed {:.3f}: {} x {} takes {:.1f} ms on rank 0 alone, {:.1f} ms while every "
      "rank runs it\n",
      k.speed, k.iterations, k.kernel, k.alone_s * 1e3, k.together_s * 1e3);
  if (const std::optional<Emulation>& emulation = r.cluster.emulation)
    s += fmt::format(
        "one machine: the devices share the compute of {:.2f} devices (emulation."
        "shared_compute); a compute after idle time takes {:.0f} us more ({} x the kernel: "
        "{:.2f} ms alone, {:.2f} ms in a token ring; emulation.resume_s)\n",
        emulation->shared_compute, k.resume_s * 1e6, k.chunk_iterations, k.chunk_alone_s * 1e3,
        k.chunk_ring_s * 1e3);
  if (r.one_machine && k.together_by_rank_s.size() >= 2) {
    const std::vector<double>& t = k.together_by_rank_s;
    const auto [fast, slow] = std::minmax_element(t.begin(), t.end());
    if (*slow > *fast * kUnalikeCoresRatio)
      s += fmt::format(
          "note: the ranks ran the loop up to {:.2f}x apart (rank {} {:.1f} ms, rank {} {:.1f} "
          "ms): this machine's cores are not alike; the slowest rank sets a step's pace, so "
          "`dapple profile` keeps the slowest device core's times (Note [Devices as cores]; "
          "not with DAPPLE_PIN_CORES=0)\n",
          *slow / *fast, slow - t.begin(), *slow * 1e3, fast - t.begin(), *fast * 1e3);
  }
  return s;
}

// On one machine: how late a waiting rank wakes, and what streams and allreduces take from
// the shared cores.
std::string EmulationLoadsSummary(const CalibrationResult& r, const Emulation& emulation) {
  const ComputeSpeed& k = *r.compute;
  std::string s;
  if (k.busy_tokens > 0) {
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
        emulation.wake_s * 1e6, rings, k.link_latency_s * 1e6);
  }
  if (r.intra_stream_load || r.inter_stream_load)
    s += fmt::format(
        "a stream between two ranks takes the compute of {} devices from the shared cores "
        "(emulation.intra_server_stream_load, inter_server_stream_load)\n",
        r.intra_stream_load && r.inter_stream_load
            ? fmt::format("{:.2f} (intra-server), {:.2f} (inter-server)", *r.intra_stream_load,
                          *r.inter_stream_load)
            : fmt::format("{:.2f}",
                          r.intra_stream_load ? *r.intra_stream_load : *r.inter_stream_load));
  if (r.intra_allreduce_load) {
    const AllReduceLoad& l = *r.intra_allreduce_load;
    const double C = emulation.shared_compute;
    s += fmt::format(
        "an allreduce of {} between ranks {} and {} took {:.2f} ms alone and {:.2f} ms "
        "({:.2f}x) while the other {} ranks computed ({:.2f}x from sharing the cores); their "
        "loop ran {:.2f}x slower, as if it took {:.2f} devices per rank (recorded only, not "
        "used by the cost model: docs/two-server.md)\n",
        internal::ByteSize(l.bytes), l.ranks.first, l.ranks.second, l.alone_s * 1e3,
        l.loaded_s * 1e3, l.loaded_s / std::max(l.alone_s, 1e-12), l.computing,
        std::max(1.0, (l.computing + 2 * l.load_per_rank) / C), l.compute_stretch, l.load_per_rank);
  }
  return s;
}

}  // namespace

std::string CalibrationToJsonText(const CalibrationResult& r) {
  auto root = OJson::parse(ClusterToJsonText(r.cluster));
  OJson c;
  c["tool"] = "dapple calibrate";
  c["note"] =
      "point-to-point samples are one-way times (half the fastest of the repeated round "
      "trips); allreduce samples are the mean seconds per float32 sum over the ranks listed; "
      "bus bandwidth = 2(r-1)/r x bytes / time (docs/design.md section 4)";
  c["ranks"] = RanksJson(r);
  c["intra_server"] = LinkJson(r.intra_pair, r.intra);
  c["inter_server"] = LinkJson(r.inter_pair, r.inter);
  std::vector<int> world(r.hosts.size());
  for (size_t i = 0; i < world.size(); ++i) world[i] = static_cast<int>(i);
  c["allreduce"] = AllReduceJson(world, r.allreduce, r.allreduce_fit);
  c["intra_server_allreduce"] =
      r.intra_allreduce.empty()
          ? OJson(nullptr)
          : AllReduceJson(r.intra_allreduce_ranks, r.intra_allreduce, r.intra_allreduce_fit);
  if (r.compute) c["compute"] = ComputeJson(r);
  c["options"] = {{"repeats", r.options.repeats},
                  {"budget_s", r.options.budget.count() / 1000.0},
                  {"timeout_s", r.timeout_s},
                  {"min_fit_bytes", r.options.min_fit_bytes}};
  root["calibration"] = c;
  return root.dump(2) + "\n";
}

std::string CalibrationSummary(const CalibrationResult& r) {
  std::string s = DevicesSummary(r.cluster);
  s += LinkSummary("intra-server", r.intra_pair, r.intra);
  s += LinkSummary("inter-server", r.inter_pair, r.inter);
  s += AllReduceSummary(fmt::format("allreduce over {} ranks", r.hosts.size()), r.allreduce,
                        r.allreduce_fit);
  if (!r.intra_allreduce.empty())
    s += AllReduceSummary(
        fmt::format("allreduce inside server 0 ({} ranks)", r.intra_allreduce_ranks.size()),
        r.intra_allreduce, r.intra_allreduce_fit);
  if (r.compute) {
    s += ComputeSummary(r);
    if (r.cluster.emulation) s += EmulationLoadsSummary(r, *r.cluster.emulation);
  }
  return s;
}

}  // namespace dapple
