// The allreduce sweep and the compute speed of `dapple calibrate`: see calibration_steps.h.
#include "dapple/runtime/calibration_steps.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "dapple/common/error.h"
#include "dapple/runtime/communicator.h"

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

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

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
    auto t = torch::ones({std::max<int64_t>(1, n / 4)}, torch::kFloat32);
    std::string what = fmt::format("calibrate {}: {} on rank {}", who, ByteSize(n), comm.rank());
    comm.AllReduceSum(t, group, what);  // warm-up, and every member is here
    auto start = Clock::now();
    for (int i = 0; i < reps; ++i) comm.AllReduceSum(t, group, what);
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
// Note [Wake-up cost]: a device that waits for a message sleeps in its receive; when the
// bytes are in, gloo's reader thread and then the waiting thread each need a core. When the
// other processes keep the cores busy the kernel often leaves them waiting on a busy core
// for part of a time slice. In a pipeline here (4 ranks, 2 cores) a message reached a
// waiting rank 1-2 ms after its send on average, against 0.3 ms with 2 ranks
// (docs/two-server.md). Measured as the token ring above with ranks - 1 tokens at once, so
// that all but the waiting rank compute, in chunks of about 3 ms (a pipeline op's size here:
// the wait grows with how long the others compute before the kernel switches): the mean
// send-to-wake-up there minus that of the one-token ring (the same bytes and wake-up with
// cores free). The mean, not the median: the cost is a tail (most wake-ups are quick, some
// wait a slice) and a pipeline's critical path pays its mean. The simulator adds it to every
// receive a device waits at (shared_compute_wake_s).
namespace {

constexpr uint32_t kTagResumeToken = 7103;  // + token number
constexpr int kResumeRounds = 15;

// The kernel every compute measurement times: one 64x1024 @ 1024x1024 float32 matmul (a 4 MiB
// weight, a pipeline op's size here), on this rank's own tensors.
class MatmulLoop {
 public:
  static constexpr const char* kName = "64x1024 @ 1024x1024 float32 matmul";
  MatmulLoop()
      : x_(torch::randn({64, 1024})),
        w_(torch::randn({1024, 1024})),
        y_(torch::empty({64, 1024})) {}
  // Seconds for `iterations` matmuls.
  double operator()(int iterations) {
    torch::NoGradGuard no_grad;
    auto start = Clock::now();
    for (int i = 0; i < iterations; ++i) torch::mm_out(y_, x_, w_);
    return SecondsSince(start);
  }

 private:
  torch::Tensor x_, w_, y_;
};

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
  RingResult one = RunTokenRing(comm, run, r.chunk_iterations, 1, kResumeRounds,
                                "calibrate resume cost (token ring)");
  r.chunk_ring_s = one.median_chunk_s;
  r.resume_s = std::max(0.0, r.chunk_ring_s - r.chunk_alone_s);
  // Deliveries compare the clocks of two ranks: only meaningful when they share a machine.
  if (!one_machine || comm.size() < 3) return;
  r.delivery_s = one.mean_delivery_s;
  // Note [Wake-up cost]: with ranks - 1 tokens, ranks - 1 processes compute while one waits:
  // on shared cores the waiting one must be given a core when its token comes.
  r.busy_tokens = comm.size() - 1;
  const int busy_chunk = std::clamp(static_cast<int>(std::lround(0.003 / per_iteration)), 1, 1000);
  RingResult busy = RunTokenRing(comm, run, busy_chunk, r.busy_tokens, kResumeRounds,
                                 "calibrate wake-up cost (busy token ring)");
  r.busy_delivery_s = busy.mean_delivery_s;
  r.wake_s = std::max(0.0, r.busy_delivery_s - r.delivery_s);
}

}  // namespace

// Note [Compute speed under concurrency]: `dapple profile` times each layer in one process
// with the machine to itself. When the devices of a job are processes sharing a machine's
// cores (the two-server network of scripts/netns.sh on one machine, or several CPU
// "devices" on one host), each computes slower while the others compute. The ratio of the
// same loop's time alone to its time while every rank runs it is the speed the cost model
// should use. On machines whose devices do not share anything it is about 1.
ComputeSpeed MeasureComputeSpeed(Communicator& comm, bool one_machine) {
  ComputeSpeed r;
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
  auto sum = torch::full({1}, Median(together), torch::kFloat64);
  comm.AllReduceSum(sum, "", "calibrate compute speed: gathering");
  r.together_s = sum[0].item<double>() / comm.size();
  r.speed = r.alone_s / r.together_s;
  MeasureResumeCost(comm, run, one_machine, r);
  return r;
}

// Note [Stream load]: on one machine gloo's copies and sums and the kernel's moving of the
// bytes run on the cores the devices compute on. The ranks other than a and b (k of them)
// time the compute loop twice: while a and b idle, then while a streams 1 MiB messages to b
// (for 0.5 s, longer than the loop), three times (the median ratio). With C = speed x ranks devices
// of compute, the loop's stretch is max(1, k / C) without the stream and max(1, (k + x) / C) with
// it, so x = C x stretch_with - k. With k < C a small load goes unseen (a lower bound).
double MeasureStreamLoad(Communicator& comm, int a, int b, const ComputeSpeed& speed) {
  const int n = comm.size(), me = comm.rank(), k = n - 2;
  DAPPLE_CHECK(n >= 3 && a != b);
  MatmulLoop loop;
  auto run = [&] { return loop(speed.iterations); };
  const bool computes = me != a && me != b;
  const auto ms = comm.timeout();
  const std::string who = fmt::format("calibrate stream load {} -> {}", a, b);
  if (computes) run();  // warm-up
  constexpr uint32_t kTagStream = 7104;
  auto msg = torch::zeros({1 << 18}, torch::kFloat32);  // 1 MiB; msg[0] = 1: more follow
  std::vector<double> ratios;                           // with / without, on a computing rank
  for (int rep = 0; rep < 3; ++rep) {  // the median of 3: one stream is noisy on a loaded host
    comm.Barrier(who + ": without the stream");
    const double without = computes ? run() : 0;
    comm.Barrier(who + ": with the stream");
    if (me == a) {
      auto start = Clock::now();
      for (int i = 0; i < 100000; ++i) {
        const bool last = SecondsSince(start) > 0.5;
        msg[0] = last ? 0.0 : 1.0;
        comm.Send(msg, b, kTagStream, who).Wait(ms);
        if (last) break;
      }
    } else if (me == b) {
      do {
        comm.Recv(msg, a, kTagStream, who).Wait(ms);
      } while (msg[0].item<float>() != 0);
    } else {
      ratios.push_back(run() / std::max(without, 1e-9));
    }
  }
  auto ratio = torch::full({1}, computes ? Median(ratios) : 0.0, torch::kFloat64);
  comm.AllReduceSum(ratio, "", who + ": gathering");
  const double C = speed.speed * n;
  const double stretch_with = std::max(1.0, k / C) * ratio[0].item<double>() / k;
  return stretch_with > 1 ? std::max(0.0, C * stretch_with - k) : 0.0;
}

// Note [Allreduce load]: on one machine an allreduce between two ranks of a server runs on
// the cores the others compute on, and, unlike a stream over the shaped link, nothing but
// the cores paces it. Ranks a and b allreduce 4 MiB (a bucket's size) in a loop, first while
// the others idle (the time per call alone), then for 0.5 s while the others (k of them) time
// the compute loop (and keep computing until the 0.5 s are over), three times. As for a stream (Note [Stream load]) the loop's stretch
// gives the devices the pair takes, x = C x stretch - k, split over its two ranks. The
// allreduce's own time while the others compute is recorded against alone. Processor
// sharing predicts a stretch of max(1, (k + x) / C); here it was 1.54-1.57x against 1.61-1.78x.
// Both go into the calibration record only: in training, 4 MiB buckets ran at about their
// time alone while every device computed, and a simulator that stretched them and charged x
// put GBS 512 plans 8-13% over their measured times (docs/two-server.md).
AllReduceLoad MeasureAllReduceLoad(Communicator& comm, int a, int b, const std::string& group,
                                   const ComputeSpeed& speed) {
  const int n = comm.size(), me = comm.rank(), k = n - 2;
  DAPPLE_CHECK(n >= 3 && a != b);
  MatmulLoop loop;
  auto run = [&] { return loop(speed.iterations); };
  const bool member = me == a || me == b;
  const std::string who = fmt::format("calibrate allreduce load {} + {}", a, b);
  auto t = torch::ones({1 << 20}, torch::kFloat32);  // 4 MiB; t[0] after the sum: 2 = go on
  AllReduceLoad r;
  r.ranks = {a, b};
  r.computing = k;
  r.bytes = static_cast<double>(t.numel()) * 4;
  if (!member) run();  // warm-up
  std::vector<double> ratios, alone, loaded;
  for (int rep = 0; rep < 3; ++rep) {
    comm.Barrier(who + ": the allreduce alone");
    if (member) {
      comm.AllReduceSum(t, group, who);  // warm-up, and both are here
      auto start = Clock::now();
      constexpr int kCalls = 10;
      for (int i = 0; i < kCalls; ++i) comm.AllReduceSum(t, group, who);
      alone.push_back(SecondsSince(start) / kCalls);
    }
    comm.Barrier(who + ": without the allreduce");
    const double without = member ? 0 : run();
    comm.Barrier(who + ": with the allreduce");
    if (member) {
      auto start = Clock::now();
      int calls = 0;
      for (bool more = true; more && calls < 100000; ++calls) {
        t[0] = SecondsSince(start) < 0.5 ? 1.0f : 0.0f;
        comm.AllReduceSum(t, group, who);
        more = t[0].item<float>() > 1.5f;  // both members still within the 0.5 s
      }
      loaded.push_back(SecondsSince(start) / std::max(calls, 1));
    } else {
      // The first loop is timed; more keep the cores busy until the allreduces stop.
      auto start = Clock::now();
      ratios.push_back(run() / std::max(without, 1e-9));
      while (SecondsSince(start) < 0.6) run();
    }
  }
  auto sum = torch::zeros({3}, torch::kFloat64);
  if (me == a) sum[0] = Median(alone), sum[1] = Median(loaded);
  if (!member) sum[2] = Median(ratios);
  comm.AllReduceSum(sum, "", who + ": gathering");
  r.alone_s = sum[0].item<double>();
  r.loaded_s = sum[1].item<double>();
  r.compute_stretch = sum[2].item<double>() / k;
  const double C = speed.speed * n;
  const double stretch_with = std::max(1.0, k / C) * r.compute_stretch;
  r.load_per_rank = stretch_with > 1 ? std::max(0.0, C * stretch_with - k) / 2 : 0.0;
  return r;
}

}  // namespace dapple::internal
