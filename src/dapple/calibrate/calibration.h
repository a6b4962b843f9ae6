// Calibration: measures, through the runtime's own Communicator, what the cost model
// needs about the machines a job runs on (point-to-point latency and bandwidth inside a
// server and between servers, allreduce time against size) and writes it as a cluster.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dapple/common/error.h"
#include "dapple/format/cluster.h"

namespace dapple {

class Communicator;

// Thrown by Calibrate on the ranks that stop because another rank failed (that rank throws
// the InputError that says why), so that a launcher of many ranks can print one line.
class PeerFailedError : public InputError {
 public:
  using InputError::InputError;
};

// One measured point: `seconds` for a message (or allreduce) of `bytes`; for point-to-point,
// the one-way time (half the fastest round trip of a ping-pong, see calibration.cc).
struct TimingSample {
  double bytes = 0;
  double seconds = 0;
};

// t(bytes) = latency_s + bytes / bandwidth_bytes_per_s, fitted to `samples`.
struct LinkFit {
  double latency_s = 0;
  double bandwidth_bytes_per_s = 0;
  double max_relative_error = 0;  // max over samples of |fit - measured| / measured
  std::vector<TimingSample> samples;
};

// Fits t = latency + bytes / bandwidth by least squares in the two regimes of a sweep: the
// bandwidth is the least squares slope over the bandwidth-dominated sizes (bytes >= the
// largest / 64, at least two sizes), the latency the least squares intercept, at that slope,
// over the latency-dominated smaller sizes (transfer at most half the time; clamped at 0). One
// least squares line over all sizes is pulled off the large-message slope by a few slow small
// messages (scheduler noise) and by a token bucket's burst, which lets mid-sized messages through
// faster than the rate. Throws InputError naming `what` when there are fewer than two distinct
// sizes or the time does not grow with size (bandwidth not measurable).
LinkFit FitLatencyBandwidth(const std::vector<TimingSample>& samples, const std::string& what);

// A ring allreduce over `ranks` ranks: t(bytes) = 2(r-1) x step_latency_s + 2(r-1)/r x bytes /
// bus_bandwidth_bytes_per_s (docs/design.md section 4), fitted as FitLatencyBandwidth does on the
// bytes each rank sends. These are the allreduce fields of a cluster's links.
struct AllReduceFit {
  int ranks = 2;
  double bus_bandwidth_bytes_per_s = 0;
  double step_latency_s = 0;
  LinkFit fit;  // on the bytes each rank sends, 2(r-1)/r x bytes
};
// Throws InputError naming `what` as FitLatencyBandwidth does. REQUIRES: ranks >= 2.
AllReduceFit FitAllReduce(const std::vector<TimingSample>& samples, int ranks,
                          const std::string& what);

// The compute speed of a device while every device of the job computes, relative to one
// process computing alone on the same machine (calibration_steps.cc explains why).
struct ComputeSpeed {
  std::string kernel;
  int iterations = 0;
  double alone_s = 0;     // rank 0's loop, the other ranks idle
  double together_s = 0;  // the mean over ranks of the same loop, every rank running it
  std::vector<double> together_by_rank_s;  // each rank's median of it (Note [Per-server speeds])
  double speed = 1;                        // alone_s / together_s
  // Note [Resume cost] in calibration_steps.cc: a chunk of the loop run in a token ring
  // (one rank computing at a time) against the same chunk alone; >= 0.
  int chunk_iterations = 0;
  bool cold_caches = false;  // chunk_alone_s was timed after a 64 MiB write
  double chunk_alone_s = 0, chunk_ring_s = 0;
  double resume_s = 0;  // max(0, chunk_ring_s - chunk_alone_s)
  // Note [Wake-up cost]: the mean time from a token's send to its waiting receiver's wake-up,
  // in the ring above (delivery_s) and in one where tokens = ranks - 1 circulate at once, so
  // that every rank but the waiting one computes (busy_delivery_s; with 2 ranks that is the
  // ring above); wake_s = max(0, busy_delivery_s - link_latency_s), the link's fitted
  // latency (one machine only: the deliveries compare two ranks' clocks).
  int busy_tokens = 0;
  double delivery_s = 0, busy_delivery_s = 0;
  double link_latency_s = 0;
  double wake_s = 0;
};

// The server of each rank, grouping ranks by the host name they reported (servers numbered
// in order of first appearance). Devices are numbered server by server and the device id is
// the global rank, so the ranks of one host must be consecutive: throws InputError naming
// the host and its ranks otherwise.
std::vector<int> ServersOfRanks(const std::vector<std::string>& hosts);

// The host name this process reports: $DAPPLE_HOST when set (network namespaces share the
// machine's host name), else gethostname().
std::string CalibrationHostName();

// The machine's physical memory in bytes (sysconf).
double PhysicalMemoryBytes();

// The running kernel's boot id (/proc/sys/kernel/random/boot_id; "" when unreadable): equal
// on every process of one machine, network namespaces included.
std::string MachineBootId();

// Sizes 4 B, 16 B, ... (x4) up to and including `max_bytes` (or the last power below it).
std::vector<int64_t> SizeSweep(int64_t min_bytes, int64_t max_bytes);

// Note [Allreduce load] in calibration_steps.cc: an allreduce between two ranks of one server
// while the other ranks compute, against each alone.
struct AllReduceLoad {
  std::pair<int, int> ranks;
  int computing = 0;           // the other ranks, which run the compute loop meanwhile
  double bytes = 0;            // per allreduce
  double alone_s = 0;          // mean time of one allreduce, the other ranks idle
  double loaded_s = 0;         // the same while they compute
  double compute_stretch = 0;  // the compute loop's time with the allreduces running / without
  double load_per_rank = 0;    // devices of shared compute each member takes, >= 0
};

struct CalibrationOptions {
  std::vector<int64_t> p2p_sizes = SizeSweep(4, 16 << 20);
  std::vector<int64_t> allreduce_sizes = SizeSweep(4, 16 << 20);
  int repeats = 10;  // timed round trips (or allreduces) per size, after one warm-up
  // Wall time one link's (or the allreduce's) sweep may take: larger sizes are skipped when
  // they would not finish in it. The sizes up to `min_fit_bytes` must finish, else the link
  // is too slow to measure (InputError). REQUIRES: well below the communicator's timeout,
  // which bounds the waits of ranks not taking part in a measurement.
  std::chrono::milliseconds budget{20000};
  int64_t min_fit_bytes = 1 << 20;
  std::string name = "calibrated";
  // Device compute speed relative to the profile's device; <= 0: measured (ComputeSpeed).
  double speed = 0;
  double memory_bytes = 0;  // per device; 0: the server's physical memory / its devices
  // The resume cost's chunk alone timed after a 64 MiB write (Note [Resume cost]), for
  // profiles taken with cold caches (ProfilerOptions::cold_caches).
  bool cold_caches = false;
};

struct CalibrationResult {
  Cluster cluster;
  std::vector<std::string> hosts;  // by rank
  std::vector<int> server_of_rank;
  // The pair measured for each link (initiator, responder) and its fit; absent when no
  // server runs two ranks (intra) or there is one server (inter).
  std::optional<std::pair<int, int>> intra_pair, inter_pair;
  std::optional<LinkFit> intra, inter;
  std::vector<TimingSample> allreduce;  // world allreduce (float32 sum): seconds per call
  std::optional<AllReduceFit> allreduce_fit;
  // The allreduce among the ranks of server 0 alone, when the world spans servers and
  // server 0 runs two ranks or more (else the world's is the intra-server one).
  std::vector<int> intra_allreduce_ranks;
  std::vector<TimingSample> intra_allreduce;
  std::optional<AllReduceFit> intra_allreduce_fit;
  std::optional<ComputeSpeed> compute;  // when the speed was measured
  // Compute (devices) a stream over each link's pair takes from shared cores: measured with
  // the speed when there are 3 or more ranks (Note [Stream load], calibration_steps.cc).
  std::optional<double> intra_stream_load, inter_stream_load;
  // On one machine with 3 or more ranks and a server running two.
  std::optional<AllReduceLoad> intra_allreduce_load;
  // Every rank reported the same boot id: the devices share one machine's cores, and the
  // cluster gets emulation.shared_compute = compute->speed x ranks with device speed 1.
  bool one_machine = false;
  // Each rank's resident memory after the measurements (bytes; 0 where the kernel does not
  // say): the cluster's process_memory_bytes per server is the largest of its ranks'.
  std::vector<double> resident_bytes;
  CalibrationOptions options;
  double timeout_s = 0;
};

// Measures the links and the allreduce. Collective over the world: every rank calls it with
// the same options and its own host name. Returns the result on rank 0 and std::nullopt on
// the others. Throws InputError (on every rank) naming the link when a measurement is
// impossible: a peer that does not answer within the communicator's timeout, or a link too
// slow for the sizes up to min_fit_bytes to finish within the budget.
// REQUIRES: comm.size() >= 2.
std::optional<CalibrationResult> Calibrate(Communicator& comm, const std::string& host,
                                           const CalibrationOptions& options);

// `result.cluster` as dapple-cluster/1 JSON with a "calibration" field holding the ranks,
// hosts, fits, samples and the allreduce table (readers of the cluster format ignore it).
std::string CalibrationToJsonText(const CalibrationResult& result);

// A few lines for people: servers, fitted links, the allreduce table.
std::string CalibrationSummary(const CalibrationResult& result);

}  // namespace dapple
