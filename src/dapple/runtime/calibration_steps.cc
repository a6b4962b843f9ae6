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
namespace {

constexpr uint32_t kTagResumeToken = 7103;
constexpr int kResumeRounds = 15;

// The kernel every compute measurement times: one 64x1024 @ 1024x1024 float32 matmul (a 4 MiB
// weight, a pipeline op's size here), on this rank's own tensors.
class MatmulLoop {
 public:
  static constexpr const char* kName = "64x1024 @ 1024x1024 float32 matmul";
  MatmulLoop()
      : x_(torch::randn({64, 1024})), w_(torch::randn({1024, 1024})), y_(torch::empty({64, 1024})) {}
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

void MeasureResumeCost(Communicator& comm, MatmulLoop& run, ComputeSpeed& r) {
  const double per_iteration = r.alone_s / std::max(1, r.iterations);
  r.chunk_iterations = std::clamp(static_cast<int>(0.002 / per_iteration), 1, 1000);
  r.chunk_alone_s = per_iteration * r.chunk_iterations;
  const int n = comm.size(), me = comm.rank();
  const auto ms = comm.timeout();
  auto token = torch::zeros({1}, torch::kFloat32);
  comm.Barrier("calibrate resume cost: start");
  std::vector<double> chunks;
  for (int round = 0; round < kResumeRounds; ++round) {
    std::string what = fmt::format("calibrate resume cost: token round {} on rank {}", round, me);
    if (me != 0 || round > 0) comm.Recv(token, (me + n - 1) % n, kTagResumeToken, what).Wait(ms);
    chunks.push_back(run(r.chunk_iterations));
    if (me != n - 1 || round + 1 < kResumeRounds)
      comm.Send(token, (me + 1) % n, kTagResumeToken, what).Wait(ms);
  }
  auto sum = torch::full({1}, Median(chunks), torch::kFloat64);
  comm.AllReduceSum(sum, "", "calibrate resume cost: gathering");
  r.chunk_ring_s = sum[0].item<double>() / n;
  r.resume_s = std::max(0.0, r.chunk_ring_s - r.chunk_alone_s);
}

}  // namespace

// Note [Compute speed under concurrency]: `dapple profile` times each layer in one process
// with the machine to itself. When the devices of a job are processes sharing a machine's
// cores (the two-server network of scripts/netns.sh on one machine, or several CPU
// "devices" on one host), each computes slower while the others compute. The ratio of the
// same loop's time alone to its time while every rank runs it is the speed the cost model
// should use. On machines whose devices do not share anything it is about 1.
ComputeSpeed MeasureComputeSpeed(Communicator& comm) {
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
  MeasureResumeCost(comm, run, r);
  return r;
}

// Note [Stream load]: on one machine gloo's copies and sums and the kernel's moving of the
// bytes run on the cores the devices compute on. The ranks other than a and b (k of them)
// time the compute loop twice: while a and b idle, then while a streams 1 MiB messages to b
// (for 0.5 s, longer than the loop), three times (the median ratio). With C = speed x ranks devices of compute, the loop's
// stretch is max(1, k / C) without the stream and max(1, (k + x) / C) with it, so
// x = C x stretch_with - k. With k < C a small load goes unseen (a lower bound).
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
  std::vector<double> ratios;                            // with / without, on a computing rank
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

}  // namespace dapple::internal
