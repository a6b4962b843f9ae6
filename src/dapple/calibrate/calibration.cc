// Calibrate: host discovery, ping-pong sweeps over the intra- and inter-server links, an
// allreduce sweep, and the cluster they describe. Every loop is bounded by the size list,
// the repeat count and the budget; every wait by the communicator's timeout.
#include "dapple/calibrate/calibration.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "dapple/calibrate/calibration_steps.h"
#include "dapple/calibrate/server_speeds.h"
#include "dapple/common/error.h"
#include "dapple/common/malloc_tuning.h"
#include "dapple/common/process_memory.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/device.h"

namespace dapple {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kTagControl = 7101;
constexpr uint32_t kTagData = 7102;
using internal::ByteSize;
using internal::kMinRepeats;
using internal::RepeatsThatFit;
using internal::SecondsSince;

// Note [Fastest round trip]: a round trip's time is the link's plus whatever scheduling
// delay the four processes' wake-ups met; on a loaded machine the latter is milliseconds,
// more than a 4 MiB loopback transfer takes. The fastest of the repeats is the one that
// met the least delay, so it is what the link itself needs. A shaped link is deterministic
// enough that the fastest and the typical repeat agree (within 1% at 100 Mbit/s).
double Fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// A link under measurement: `a` times round trips to `b`.
struct Link {
  std::string name;  // "inter-server"
  int a = 0, b = 0;
  std::string hosts;  // "rank 0 (dapple-s0) <-> rank 2 (dapple-s1)"
};

// The initiator's side of a ping-pong sweep: for each size, tells the responder the size
// index and repeat count (-1: done), then one warm-up and `reps` timed round trips. Stops
// before a size that would not finish within the budget. Returns one-way times.
std::vector<TimingSample> PingPongInitiator(Communicator& comm, const Link& l,
                                            const CalibrationOptions& o) {
  auto ms = comm.timeout();
  auto control = torch::zeros({2}, torch::kInt64);
  // Note [Calibrating GPUs] (calibrate_cmd.cc): the messages live where training's do.
  const auto on_device = torch::TensorOptions(torch::kUInt8).device(comm.device());
  auto buf = torch::zeros({o.p2p_sizes.back()}, on_device);
  auto echo = torch::zeros({o.p2p_sizes.back()}, on_device);
  std::vector<TimingSample> samples;
  const double budget_s = o.budget.count() / 1000.0;
  auto t0 = Clock::now();
  for (size_t k = 0; k < o.p2p_sizes.size(); ++k) {
    const int64_t n = o.p2p_sizes[k];
    int reps = o.repeats;
    if (!samples.empty()) {  // predicted round trip: the last one scaled with the size
      double rtt = 2 * samples.back().seconds * std::max(1.0, n / samples.back().bytes);
      reps = RepeatsThatFit(rtt, budget_s - SecondsSince(t0), o.repeats);
      if (reps == 0) break;
    }
    control[0] = static_cast<int64_t>(k);
    control[1] = reps;
    std::string what = fmt::format("calibrate {}: {}, {} message", l.name, l.hosts, ByteSize(n));
    comm.Send(control, l.b, kTagControl, what + " (control)").Wait(ms);
    auto out = buf.narrow(0, 0, n), in = echo.narrow(0, 0, n);
    std::vector<double> rtts;
    for (int i = 0; i <= reps; ++i) {  // i == 0: warm-up
      auto start = Clock::now();
      CommWork r = comm.Recv(in, l.b, kTagData, what + " (echo)");
      comm.Send(out, l.b, kTagData, what).Wait(ms);
      r.Wait(ms);
      SynchronizeDevice(comm.device());  // a GPU's wait only orders its stream
      if (i > 0) rtts.push_back(SecondsSince(start));
    }
    samples.push_back({static_cast<double>(n), Fastest(rtts) / 2});
  }
  control[0] = -1;
  control[1] = 0;
  comm.Send(control, l.b, kTagControl, fmt::format("calibrate {}: {} (done)", l.name, l.hosts))
      .Wait(ms);
  return samples;
}

// The responder's side: echoes what the initiator sends, for as many sizes as it asks
// (at most the size list, so the loop is bounded even against a confused peer).
void PingPongResponder(Communicator& comm, const Link& l, const CalibrationOptions& o) {
  auto ms = comm.timeout();
  auto control = torch::zeros({2}, torch::kInt64);
  auto buf =
      torch::zeros({o.p2p_sizes.back()}, torch::TensorOptions(torch::kUInt8).device(comm.device()));
  for (size_t step = 0; step <= o.p2p_sizes.size(); ++step) {
    std::string what = fmt::format("calibrate {}: {} (control)", l.name, l.hosts);
    comm.Recv(control, l.a, kTagControl, what).Wait(ms);
    int64_t k = control[0].item<int64_t>(), reps = control[1].item<int64_t>();
    if (k < 0) return;
    DAPPLE_CHECK(k < static_cast<int64_t>(o.p2p_sizes.size()) && reps >= 0 && reps <= o.repeats,
                 "calibrate: bad control message");
    auto in = buf.narrow(0, 0, o.p2p_sizes[k]);
    what = fmt::format("calibrate {}: {}, {} message", l.name, l.hosts, ByteSize(o.p2p_sizes[k]));
    for (int64_t i = 0; i <= reps; ++i) {
      comm.Recv(in, l.a, kTagData, what).Wait(ms);
      comm.Send(in, l.a, kTagData, what + " (echo)").Wait(ms);
      SynchronizeDevice(comm.device());
    }
  }
  DAPPLE_CHECK(false, "calibrate: the initiator sent more sizes than the list holds");
}

// Runs `body` on this rank (it may throw InputError), then tells every rank who failed, so
// that all stop together instead of waiting out the timeout. Throws InputError on every
// rank when one failed: the failing rank's own message, or a line naming that rank.
void AgreeOnFailure(Communicator& comm, const std::string& phase,
                    const std::function<void()>& body) {
  std::string error;
  try {
    body();
  } catch (const InputError& e) {
    error = e.what();
  }
  auto failed = torch::zeros({comm.size()}, torch::kFloat64);
  if (!error.empty()) failed[comm.rank()] = 1.0;
  comm.AllReduceSum(failed, "", fmt::format("calibrate {}: rank {} reporting", phase, comm.rank()));
  if (!error.empty()) throw InputError(error);
  for (int r = 0; r < comm.size(); ++r) {
    if (failed[r].item<double>() > 0)
      throw PeerFailedError(fmt::format(
          "calibrate {}: stopped because rank {} failed (its message says why)", phase, r));
  }
}

void MeasureLink(Communicator& comm, const Link& l, const CalibrationOptions& o,
                 std::optional<LinkFit>* fit) {
  AgreeOnFailure(comm, l.name, [&] {
    if (comm.rank() == l.b) PingPongResponder(comm, l, o);
    if (comm.rank() != l.a) return;
    auto samples = PingPongInitiator(comm, l, o);
    int64_t need = std::min(o.min_fit_bytes, o.p2p_sizes.back());
    if (samples.empty() || samples.back().bytes < need) {
      double rate = samples.empty() ? 0 : samples.back().bytes / samples.back().seconds;
      ThrowInput(
          "calibrate {}: {}: link too slow to measure: messages up to {} must finish within "
          "the {:.1f} s budget but only {} did (about {:.3g} MB/s); raise --budget or lower "
          "--min-fit-bytes",
          l.name, l.hosts, ByteSize(need), o.budget.count() / 1000.0,
          samples.empty() ? "none" : ByteSize(samples.back().bytes), rate / 1e6);
    }
    *fit = FitLatencyBandwidth(samples, fmt::format("calibrate {}: {}", l.name, l.hosts));
  });
}

// Hosts -> servers on rank 0, then the mapping to everyone: each rank's server, and r.hosts,
// r.one_machine, r.server_of_rank (rank 0) and every rank's physical memory (rank 0) filled.
std::vector<int> DiscoverServers(Communicator& comm, const std::string& host, CalibrationResult& r,
                                 std::vector<double>& memory) {
  const int world = comm.size();
  auto reports = comm.GatherStrings(
      "calibrate/host",
      host + "\n" + fmt::format("{:.0f}", PhysicalMemoryBytes()) + "\n" + MachineBootId(), 0);
  memory.assign(world, 0);
  auto mapping = torch::zeros({world + 2}, torch::kFloat64);  // servers, error, one machine
  std::string mapping_error;
  if (comm.rank() == 0) {
    std::set<std::string> boots;
    for (const std::string& s : reports) {
      auto nl = s.find('\n'), nl2 = s.find('\n', nl + 1);
      r.hosts.push_back(s.substr(0, nl));
      memory[r.hosts.size() - 1] = std::stod(s.substr(nl + 1, nl2 - nl - 1));
      boots.insert(s.substr(nl2 + 1));
    }
    r.one_machine = boots.size() == 1 && !boots.begin()->empty();
    mapping[world + 1] = r.one_machine ? 1.0 : 0.0;
    try {
      r.server_of_rank = ServersOfRanks(r.hosts);
      for (int i = 0; i < world; ++i) mapping[i] = r.server_of_rank[i];
    } catch (const InputError& e) {
      mapping_error = e.what();
      mapping[world] = -1;  // -1 in the last slot but one: an error
    }
  }
  comm.AllReduceSum(mapping, "", "calibrate: rank to server mapping");
  if (!mapping_error.empty()) throw InputError(mapping_error);
  if (mapping[world].item<double>() < 0)
    throw PeerFailedError(
        "calibrate: rank 0 could not group the ranks into servers (its message says why)");
  r.one_machine = mapping[world + 1].item<double>() > 0;  // every rank knows it now
  std::vector<int> server(world);
  for (int i = 0; i < world; ++i) server[i] = static_cast<int>(mapping[i].item<double>());
  return server;
}

// The pairs whose links are measured: the first server with two ranks; the first ranks of
// servers 0 and 1.
void ChoosePairs(const std::vector<int>& server, CalibrationResult& r) {
  const int world = static_cast<int>(server.size());
  for (int i = 0; i + 1 < world; ++i) {
    if (server[i] == server[i + 1]) {
      r.intra_pair = {i, i + 1};
      break;
    }
  }
  for (int i = 1; i < world; ++i) {
    if (server[i] != server[0]) {
      r.inter_pair = {0, i};
      break;
    }
  }
}

Link DescribeLink(const Communicator& comm, const CalibrationResult& r, const char* name,
                  std::pair<int, int> pair) {
  const auto [a, b] = pair;
  std::string ha = comm.rank() == 0 ? " (" + r.hosts[a] + ")" : "";
  std::string hb = comm.rank() == 0 ? " (" + r.hosts[b] + ")" : "";
  return Link{name, a, b, fmt::format("rank {}{} <-> rank {}{}", a, ha, b, hb)};
}

// The allreduce over the world, and inside server 0 when the world's crosses servers;
// returns server 0's ranks when measured (else empty).
std::vector<int> MeasureAllReduces(Communicator& comm, const std::vector<int>& server,
                                   const CalibrationOptions& o, CalibrationResult& r) {
  const int world = comm.size();
  std::vector<int> world_ranks(world);
  for (int i = 0; i < world; ++i) world_ranks[i] = i;
  r.allreduce = internal::MeasureAllReduce(comm, "", world_ranks, o);
  std::vector<int> server0;
  for (int i = 0; i < world; ++i)
    if (server[i] == 0) server0.push_back(i);
  if (server0.size() < 2 || static_cast<int>(server0.size()) >= world) return {};
  if (server[comm.rank()] == 0) {
    comm.CreateGroup("calibrate-server0", server0);
    r.intra_allreduce = internal::MeasureAllReduce(comm, "calibrate-server0", server0, o);
  }
  comm.Barrier("calibrate: after the intra-server allreduce");
  r.intra_allreduce_ranks = server0;
  return server0;
}

// The devices' compute speed (unless --speed gives it) and how much a transfer or an
// allreduce slows the compute that shares the machine with it.
void MeasureComputeAndLoads(Communicator& comm, const CalibrationOptions& o, CalibrationResult& r) {
  const int world = comm.size();
  if (!(o.speed > 0))
    r.compute = internal::MeasureComputeSpeed(comm, r.one_machine, o.cold_caches,
                                              r.intra ? r.intra->latency_s : 0.0);
  if (r.compute && world == 2 && r.one_machine && r.intra_pair)
    r.intra_stream_load = internal::MeasureStreamLoadOfPair(comm, *r.compute);
  if (!r.compute || world < 3) return;
  if (r.intra_pair)
    r.intra_stream_load =
        internal::MeasureStreamLoad(comm, r.intra_pair->first, r.intra_pair->second, *r.compute);
  if (r.inter_pair)
    r.inter_stream_load =
        internal::MeasureStreamLoad(comm, r.inter_pair->first, r.inter_pair->second, *r.compute);
  if (r.intra_pair && r.one_machine) {
    const auto [a, b] = *r.intra_pair;
    if (comm.rank() == a || comm.rank() == b) comm.CreateGroup("calibrate-intra-pair", {a, b});
    r.intra_allreduce_load =
        internal::MeasureAllReduceLoad(comm, a, b, "calibrate-intra-pair", *r.compute);
  }
}

// Note [Process memory] (format/cluster.h): after the transfers, the allreduces and the
// compute loops, with their tensors freed (and the freed memory malloc kept for reuse
// handed back: a training process holds its own tensors, not these), what a rank still
// holds is the framework's own (code, pools, the communicator's buffers, the BLAS
// threads' buffers).
void MeasureResidentMemory(Communicator& comm, CalibrationResult& r) {
  const int world = comm.size();
  ReturnFreedMemory();
  torch::Tensor resident = torch::zeros({world}, torch::kFloat64);
  resident[comm.rank()] = static_cast<double>(ResidentBytes());
  comm.AllReduceSum(resident, "", "calibrate: resident memory of each rank");
  r.resident_bytes.resize(world);
  for (int i = 0; i < world; ++i) r.resident_bytes[i] = resident[i].item<double>();
}

// A fit that fails (noise on a loaded machine) leaves the links' point-to-point values
// for the allreduce; the tables stay in the output either way.
void FitAllReduces(int world, const std::vector<int>& server0, CalibrationResult& r) {
  auto fit = [](const std::vector<TimingSample>& v, int ranks,
                const char* what) -> std::optional<AllReduceFit> {
    try {
      return FitAllReduce(v, ranks, what);
    } catch (const InputError&) {
      return std::nullopt;
    }
  };
  r.allreduce_fit = fit(r.allreduce, world, "calibrate allreduce");
  if (!r.intra_allreduce.empty())
    r.intra_allreduce_fit = fit(r.intra_allreduce, static_cast<int>(server0.size()),
                                "calibrate intra-server allreduce");
}

// The devices of each server: memory (--memory-gb, else the server's memory over its
// devices), speed, and the process's own memory.
void DescribeDevices(const CalibrationResult& r, const CalibrationOptions& o,
                     const std::vector<int>& server, const std::vector<double>& memory,
                     Cluster& c) {
  const int world = static_cast<int>(server.size());
  const int num_servers = *std::max_element(server.begin(), server.end()) + 1;
  c.servers.assign(num_servers, ServerSpec{0, std::nullopt});
  // The device speed of each server: the one given (--speed), else measured. Note
  // [Compute speed under concurrency]: on one machine the devices share its cores, which
  // the simulator models itself (emulation.shared_compute), and each device alone runs as the
  // profile's did: 1. Across machines, Note [Per-server speeds] (server_speeds.cc): one
  // speed unless the servers differ.
  std::vector<double> speeds(num_servers, r.compute ? 1.0 : o.speed);
  if (r.compute && !r.one_machine)
    speeds = ServerSpeeds(r.compute->alone_s, r.compute->together_by_rank_s, server);
  for (int s : server) ++c.servers[s].devices;
  for (int s = 0; s < num_servers; ++s) {
    int first = c.FirstDeviceOf(s);
    double mem = o.memory_bytes > 0 ? o.memory_bytes : memory[first] / c.servers[s].devices;
    DeviceSpec d{mem, speeds[s]};
    // The largest of the server's ranks, and the freed memory a training rank lets malloc
    // keep (Note [Freed memory between steps]): the process's too, whatever its stage.
    for (int i = 0; i < world; ++i)
      if (server[i] == s)
        d.process_memory_bytes = std::max(d.process_memory_bytes, r.resident_bytes[i]);
    d.process_memory_bytes += static_cast<double>(kTrainingFreedMemorySlackBytes);
    if (s == 0)
      c.device = d;
    else if (mem != c.device.memory_bytes || d.speed != c.device.speed ||
             d.process_memory_bytes != c.device.process_memory_bytes)
      c.servers[s].device = d;
  }
}

// The fitted links, point-to-point and allreduce, and on one machine the emulation's
// figures.
void DescribeLinks(const CalibrationResult& r, int world, Cluster& c) {
  auto link_of = [](const LinkFit& f) { return LinkSpec{f.bandwidth_bytes_per_s, f.latency_s}; };
  if (r.intra) c.intra_server = link_of(*r.intra);
  if (r.inter) c.inter_server = link_of(*r.inter);
  if (!r.intra && r.inter) c.intra_server = c.inter_server;  // one device per server: unused
  if (!r.inter && r.intra) c.inter_server = c.intra_server;  // one server: unused
  auto set_allreduce = [](LinkSpec& l, const AllReduceFit& f) {
    l.allreduce_bandwidth_bytes_per_s = f.bus_bandwidth_bytes_per_s;
    l.allreduce_latency_s = f.step_latency_s;
  };
  if (c.servers.size() == 1) {
    if (r.allreduce_fit) set_allreduce(c.intra_server, *r.allreduce_fit);
  } else {
    if (r.allreduce_fit) set_allreduce(c.inter_server, *r.allreduce_fit);
    if (r.intra_allreduce_fit) set_allreduce(c.intra_server, *r.intra_allreduce_fit);
  }
  if (r.compute && r.one_machine) {
    Emulation& e = c.emulation.emplace();
    e.shared_compute = r.compute->speed * world;
    e.resume_s = r.compute->resume_s;
    if (r.compute->busy_tokens > 0) e.wake_s = r.compute->wake_s;
    if (r.intra_stream_load) e.intra_server_stream_load = *r.intra_stream_load;
    if (r.inter_stream_load) e.inter_server_stream_load = *r.inter_stream_load;
    if (!r.inter_pair && r.intra_stream_load)  // one server: unused, but alike
      e.inter_server_stream_load = *r.intra_stream_load;
  }
}

}  // namespace

std::optional<CalibrationResult> Calibrate(Communicator& comm, const std::string& host,
                                           const CalibrationOptions& o) {
  DAPPLE_CHECK(comm.size() >= 2 && o.repeats >= kMinRepeats && !o.p2p_sizes.empty() &&
               !o.allreduce_sizes.empty());
  const int world = comm.size();
  if (comm.timeout() < 2 * o.budget)
    ThrowInput("calibrate: --timeout ({:.1f} s) must be at least twice --budget ({:.1f} s)",
               comm.timeout().count() / 1000.0, o.budget.count() / 1000.0);
  try {
    CalibrationResult r;
    std::vector<double> memory;
    const std::vector<int> server = DiscoverServers(comm, host, r, memory);
    ChoosePairs(server, r);
    if (r.intra_pair)
      MeasureLink(comm, DescribeLink(comm, r, "intra-server", *r.intra_pair), o, &r.intra);
    if (r.inter_pair)
      MeasureLink(comm, DescribeLink(comm, r, "inter-server", *r.inter_pair), o, &r.inter);
    const std::vector<int> server0 = MeasureAllReduces(comm, server, o, r);
    MeasureComputeAndLoads(comm, o, r);
    MeasureResidentMemory(comm, r);
    if (comm.rank() != 0) return std::nullopt;
    FitAllReduces(world, server0, r);
    // The cluster: devices per server, memory per device, the fitted links.
    r.cluster.name = o.name;
    DescribeDevices(r, o, server, memory, r.cluster);
    DescribeLinks(r, world, r.cluster);
    r.options = o;
    r.timeout_s = comm.timeout().count() / 1000.0;
    ValidateCluster(r.cluster, "calibrate");
    return r;
  } catch (const CommError& e) {
    // A peer that does not answer is a fact about the machines given to calibrate.
    ThrowInput("calibrate: rank {}: {}: peer unreachable or link too slow (raise --timeout)",
               comm.rank(), e.what());
  }
}

}  // namespace dapple
