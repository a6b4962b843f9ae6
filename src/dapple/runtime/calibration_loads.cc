// The compute that communication takes from cores the ranks share (`dapple calibrate` on
// one machine): a stream's (Note [Stream load]) and an allreduce's (Note [Allreduce load]).
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

#include "dapple/common/error.h"
#include "dapple/runtime/calibration_matmul.h"
#include "dapple/runtime/calibration_steps.h"
#include "dapple/runtime/communicator.h"

namespace dapple::internal {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

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
// the cores the others compute on, and, unlike a stream over the shaped link, nothing but the
// cores paces it. Ranks a and b allreduce 4 MiB (a bucket's size) in a loop, first while the
// others idle (the time per call alone), then for 0.5 s while the others (k of them) time the
// compute loop (and keep computing until the 0.5 s are over), three times. As for a stream
// (Note [Stream load]) the loop's stretch gives the devices the pair takes, x = C x stretch - k,
// split over its two ranks; the allreduce's own time while the others compute is recorded
// against alone. Processor sharing predicts a stretch of max(1, (k + x) / C); here it was
// 1.54-1.57x against 1.61-1.78x. Both go into the calibration record only: in training the
// buckets run beside their own ranks' backward and took 2.4-3.2x their time alone, and a
// simulator that stretched them like compute and charged x put GBS 512 plans 8-13% over their
// measured times (docs/two-server.md, session 5).
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

// Note [Stream load with two ranks]: with only the pair there is nobody else to time, so both
// time the compute loop (at once, as in training) twice: alone, then while a helper thread on
// a streams 1 MiB messages to a helper thread on b, as a pipeline's transfers run beside its
// compute; the median of three ratios. With k = 2 computing, x = C x stretch_with - 2 as above.
// The helpers stop when the loop is done: a's sends a last message marked 0.
double MeasureStreamLoadOfPair(Communicator& comm, const ComputeSpeed& speed) {
  DAPPLE_CHECK(comm.size() == 2);
  const int me = comm.rank(), k = 2;
  MatmulLoop loop;
  auto run = [&] { return loop(speed.iterations); };
  const auto ms = comm.timeout();
  const std::string who = "calibrate stream load 0 -> 1, both computing";
  constexpr uint32_t kTagPairStream = 7105;
  run();  // warm-up
  std::vector<double> ratios;
  for (int rep = 0; rep < 3; ++rep) {
    comm.Barrier(who + ": without the stream");
    const double without = run();
    comm.Barrier(who + ": with the stream");
    std::atomic<bool> done{false};
    std::exception_ptr failure;
    std::thread helper([&] {
      try {
        auto msg = torch::zeros({1 << 18}, torch::kFloat32);  // 1 MiB; msg[0] = 1: more follow
        if (me == 0) {
          for (int i = 0; i < 1000000; ++i) {
            const bool last = done.load();
            msg[0] = last ? 0.0f : 1.0f;
            comm.Send(msg, 1, kTagPairStream, who).Wait(ms);
            if (last) break;
          }
        } else {
          do {
            comm.Recv(msg, 0, kTagPairStream, who).Wait(ms);
          } while (msg[0].item<float>() != 0);
        }
      } catch (...) {
        failure = std::current_exception();
      }
    });
    const double with = run();
    done = true;
    helper.join();
    if (failure) std::rethrow_exception(failure);
    ratios.push_back(with / std::max(without, 1e-9));
  }
  auto ratio = torch::full({1}, Median(ratios), torch::kFloat64);
  comm.AllReduceSum(ratio, "", who + ": gathering");
  const double C = speed.speed * comm.size();
  const double stretch_with = std::max(1.0, k / C) * ratio[0].item<double>() / comm.size();
  return stretch_with > 1 ? std::max(0.0, C * stretch_with - k) : 0.0;
}

}  // namespace dapple::internal
