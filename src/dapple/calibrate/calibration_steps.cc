// The allreduce sweep and the compute speed of `dapple calibrate`: see calibration_steps.h.
#include "dapple/calibrate/calibration_steps.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "dapple/calibrate/calibration_matmul.h"
#include "dapple/common/error.h"
#include "dapple/cpu/blas_env.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/device.h"

namespace dapple::internal {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string ByteSize(double b) {
  if (b >= (1 << 20)) return fmt::format("{:g} MiB", b / (1 << 20));
  if (b >= 1024) return fmt::format("{:g} KiB", b / 1024);
  return fmt::format("{:g} B", b);
}

int RepeatsThatFit(double op_s, double left_s, int repeats) {
  if (op_s <= 0) return repeats;
  double n = std::floor(left_s / op_s) - 1;
  if (n < kMinRepeats) return 0;
  return static_cast<int>(std::min<double>(repeats, n));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

namespace {

using Clock = std::chrono::steady_clock;

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

}  // namespace

std::vector<TimingSample> MeasureAllReduce(Communicator& comm, const std::string& group,
                                           const std::vector<int>& members,
                                           const CalibrationOptions& o) {
  DAPPLE_CHECK(!members.empty());
  const bool leader = comm.rank() == members.front();
  const std::string who = group.empty() ? "allreduce" : "allreduce (" + group + ")";
  std::vector<TimingSample> samples;
  const double budget_s = o.budget.count() / 1000.0;
  auto t0 = Clock::now();
  for (size_t k = 0; k <= o.allreduce_sizes.size(); ++k) {
    auto control = torch::zeros({2}, torch::kFloat64);
    if (leader) {
      int reps = k < o.allreduce_sizes.size() ? o.repeats : 0;
      if (reps > 0 && !samples.empty()) {
        double t =
            samples.back().seconds * std::max(1.0, o.allreduce_sizes[k] / samples.back().bytes);
        reps = RepeatsThatFit(t, budget_s - SecondsSince(t0), o.repeats);
      }
      control[0] = reps > 0 ? static_cast<double>(k) : -1.0;
      control[1] = reps;
    }
    comm.AllReduceSum(control, group, fmt::format("calibrate {}: control", who));
    if (control[0].item<double>() < 0) break;
    const int64_t n = o.allreduce_sizes[static_cast<size_t>(control[0].item<double>())];
    const int reps = static_cast<int>(control[1].item<double>());
    // Note [Calibrating GPUs] (calibrate_cmd.cc): on the device training sums on.
    auto t = torch::ones({std::max<int64_t>(1, n / 4)},
                         torch::TensorOptions(torch::kFloat32).device(comm.device()));
    std::string what = fmt::format("calibrate {}: {} on rank {}", who, ByteSize(n), comm.rank());
    comm.AllReduceSum(t, group, what);  // warm-up, and every member is here
    SynchronizeDevice(comm.device());
    auto start = Clock::now();
    for (int i = 0; i < reps; ++i) comm.AllReduceSum(t, group, what);
    SynchronizeDevice(comm.device());
    samples.push_back({static_cast<double>(n), SecondsSince(start) / reps});
  }
  return samples;
}

// Note [Resume cost]: in a pipeline on shared cores a device computes after waiting, while
// the other processes ran and evicted its weights from the caches; it pays a refill and a
// wake-up that the profile, timed back to back, never sees. Measured as a token ring: each
// rank receives a token from the previous one, times a chunk of the compute loop (about
// 2 ms, a pipeline op's size here) and passes the token on, so one rank computes at a time.
// The median chunk in the ring minus the same chunk alone (from the alone loop) is the cost
// of resuming; the simulator adds it to every forward or backward that follows idle time.
// With cold caches (`--cold-caches`, for a profile taken so: Note [Cold caches] in
// profiler.cc) the chunk alone is timed after a 64 MiB write, so that only the wake-up is left
// (the refill is in the profile already); here that made the resume cost about 0.
// Note [Wake-up cost]: a device that waits for a message sleeps in its receive; when the
// bytes are in, gloo's reader thread and then the waiting thread each need a core. When the
// other processes keep the cores busy the kernel often leaves them waiting on a busy core
// for part of a time slice. In a pipeline here (4 ranks, 2 cores) a message reached a
// waiting rank 1-2 ms after its send on average, against 0.3 ms with 2 ranks
// (docs/two-server.md). Measured as the token ring above with ranks - 1 tokens at once, so
// that all but the waiting rank compute, in chunks of about 3 ms (a pipeline op's size here:
// the wait grows with how long the others compute before the kernel switches): the mean
// send-to-wake-up there minus the link's fitted latency, which the simulator charges every
// transfer already. The mean, not the median: the cost is a tail (most wake-ups are quick,
// some wait a slice) and a pipeline's critical path pays its mean. The simulator adds it to
// every receive a device waits at (emulation.wake_s).
// Even with cores free (2 ranks, where the one-token ring is the busy ring: the other rank
// is the sender) a process that slept a few milliseconds wakes slower than one in a quick
// ping-pong (the link fit's): here 0.17-0.21 ms from send to wake-up against a 0.04 ms
// latency, as a two-stage MLP's traces showed between its stages (0.18-0.21 ms). Before, the
// busy ring was measured against the one-token ring, which left that part out and gave
// 2 ranks no wake-up cost at all.
namespace {

constexpr uint32_t kTagResumeToken = 7103;  // + token number
constexpr int kResumeRounds = 15;

struct RingResult {
  double median_chunk_s = 0;   // mean over ranks of each rank's median chunk
  double mean_delivery_s = 0;  // mean over ranks and hops of send-to-wake-up
};

// `tokens` tokens pass round the ring of all ranks, `rounds` times each, starting evenly
// spaced; a rank receives a token from its left, computes one chunk and sends it on to its
// right. Each token carries its send time (steady_clock: the ranks share one machine, which
// the callers check), so the receiver measures the delivery from when both the send and its
// wait began: the bytes, and the wake-up of a process that waited. Tokens are tagged by
// number; a rank takes them in hop order.
RingResult RunTokenRing(Communicator& comm, MatmulLoop& run, int chunk_iterations, int tokens,
                        int rounds, const std::string& who) {
  const int n = comm.size(), me = comm.rank();
  const auto ms = comm.timeout();
  const int hops = rounds * n;
  std::vector<std::pair<int, int>> visits;  // (hop, token) of the visits to this rank
  for (int k = 0; k < tokens; ++k)
    for (int v = 0; v < hops; ++v)
      if ((k * n / tokens + v) % n == me) visits.push_back({v, k});
  std::sort(visits.begin(), visits.end());
  auto now_s = [] {
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  };
  comm.Barrier(who + ": start");
  std::vector<double> chunks, deliveries;
  std::vector<CommWork> sends;
  for (const auto& [v, k] : visits) {
    auto token = torch::zeros({1}, torch::kFloat64);
    std::string what = fmt::format("{}: token {} hop {} on rank {}", who, k, v, me);
    if (v > 0) {
      const double waits_from = now_s();
      comm.Recv(token, (me + n - 1) % n, kTagResumeToken + static_cast<uint32_t>(k), what).Wait(ms);
      // From when both the send and the wait began: a token that came while this rank
      // computed another one is not a wake-up. The first lap is left out (start-up).
      if (v >= n) deliveries.push_back(now_s() - std::max(waits_from, token[0].item<double>()));
    }
    chunks.push_back(run(chunk_iterations));
    if (v + 1 < hops) {
      token[0] = now_s();
      sends.push_back(
          comm.Send(token, (me + 1) % n, kTagResumeToken + static_cast<uint32_t>(k), what));
    }
  }
  for (auto& w : sends) w.Wait(ms);
  auto sum =
      torch::tensor({Median(chunks), deliveries.empty() ? 0.0 : Mean(deliveries)}, torch::kFloat64);
  comm.AllReduceSum(sum, "", who + ": gathering");
  return {sum[0].item<double>() / n, sum[1].item<double>() / n};
}

void MeasureResumeCost(Communicator& comm, MatmulLoop& run, bool one_machine, ComputeSpeed& r) {
  const double per_iteration = r.alone_s / std::max(1, r.iterations);
  r.chunk_iterations = std::clamp(static_cast<int>(0.002 / per_iteration), 1, 1000);
  r.chunk_alone_s = per_iteration * r.chunk_iterations;
  if (r.cold_caches) {  // rank 0 times the chunk from cold caches; the others wait
    auto t = torch::zeros({1}, torch::kFloat64);
    if (comm.rank() == 0) {
      std::vector<double> v;
      for (int i = 0; i < 9; ++i) {
        EvictCpuCaches();  // as the profiler does (Note [Cold caches])
        v.push_back(run(r.chunk_iterations));
      }
      t[0] = Median(v);
    }
    comm.AllReduceSum(t, "", "calibrate resume cost: the chunk alone, cold");
    r.chunk_alone_s = t[0].item<double>();
  }
  RingResult one = RunTokenRing(comm, run, r.chunk_iterations, 1, kResumeRounds,
                                "calibrate resume cost (token ring)");
  r.chunk_ring_s = one.median_chunk_s;
  r.resume_s = std::max(0.0, r.chunk_ring_s - r.chunk_alone_s);
  // Deliveries compare the clocks of two ranks: only meaningful when they share a machine.
  if (!one_machine || comm.size() < 2) return;
  r.delivery_s = one.mean_delivery_s;
  // Note [Wake-up cost]: with ranks - 1 tokens, ranks - 1 processes compute while one waits:
  // on shared cores the waiting one must be given a core when its token comes.
  r.busy_tokens = comm.size() - 1;
  r.busy_delivery_s = r.delivery_s;
  if (r.busy_tokens > 1) {
    const int chunk = std::clamp(static_cast<int>(std::lround(0.003 / per_iteration)), 1, 1000);
    RingResult busy = RunTokenRing(comm, run, chunk, r.busy_tokens, kResumeRounds,
                                   "calibrate wake-up cost (busy token ring)");
    r.busy_delivery_s = busy.mean_delivery_s;
  }
  r.wake_s = std::max(0.0, r.busy_delivery_s - r.link_latency_s);
}

}  // namespace

// Note [Compute speed under concurrency]: `dapple profile` times each layer in one process
// with the machine to itself. When the devices of a job are processes sharing a machine's
// cores (the two-server network of scripts/netns.sh on one machine, or several CPU
// "devices" on one host), each computes slower while the others compute. The ratio of the
// same loop's time alone to its time while every rank runs it is the speed the cost model
// should use. On machines whose devices do not share anything it is about 1.
ComputeSpeed MeasureComputeSpeed(Communicator& comm, bool one_machine, bool cold_caches,
                                 double link_latency_s) {
  ComputeSpeed r;
  r.cold_caches = cold_caches;
  r.link_latency_s = link_latency_s;
  r.kernel = MatmulLoop::kName;
  MatmulLoop run;
  // Rank 0 sizes the loop to about 0.1 s alone and times it; the others wait.
  auto shared = torch::zeros({2}, torch::kFloat64);
  if (comm.rank() == 0) {
    run(3);  // warm-up
    double one = std::max(run(5) / 5, 1e-6);
    int iterations = std::clamp(static_cast<int>(0.1 / one), 5, 100000);
    std::vector<double> alone;
    for (int rep = 0; rep < 5; ++rep) alone.push_back(run(iterations));
    shared[0] = iterations;
    shared[1] = Median(alone);
  }
  comm.AllReduceSum(shared, "", "calibrate compute speed: rank 0 timing alone");
  r.iterations = static_cast<int>(shared[0].item<double>());
  r.alone_s = shared[1].item<double>();
  run(3);
  comm.Barrier("calibrate compute speed: start together");
  std::vector<double> together;
  for (int rep = 0; rep < 5; ++rep) together.push_back(run(r.iterations));
  auto by_rank = torch::zeros({comm.size()}, torch::kFloat64);
  by_rank[comm.rank()] = Median(together);
  comm.AllReduceSum(by_rank, "", "calibrate compute speed: gathering");
  r.together_by_rank_s.resize(comm.size());
  for (int i = 0; i < comm.size(); ++i) r.together_by_rank_s[i] = by_rank[i].item<double>();
  r.together_s = by_rank.sum().item<double>() / comm.size();
  r.speed = r.alone_s / r.together_s;
  MeasureResumeCost(comm, run, one_machine, r);
  return r;
}

}  // namespace dapple::internal
