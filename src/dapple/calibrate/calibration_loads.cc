// The compute that communication takes from cores the ranks share (`dapple calibrate` on
// one machine): a stream's (Note [Stream load]) and an allreduce's (Note [Allreduce load]).
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <thread>

#include "dapple/calibrate/calibration_matmul.h"
#include "dapple/calibrate/calibration_steps.h"
#include "dapple/common/error.h"
#include "dapple/runtime/comm/communicator.h"

namespace dapple::internal {
namespace {

using Clock = std::chrono::steady_clock;

// The devices of shared compute a load takes, from the compute loop's stretch (`ratio`: its
// time with the load over without) on k computing ranks out of C devices' worth: the loop
// runs at max(1, k / C) without and max(1, (k + x) / C) with it, so x = C x stretch_with - k.
// With k + x < C a small load goes unseen (a lower bound).
double DevicesFromStretch(double C, int k, double ratio) {
  const double stretch_with = std::max(1.0, k / C) * ratio;
  return stretch_with > 1 ? std::max(0.0, C * stretch_with - k) : 0.0;
}

constexpr int64_t kStreamFloats = 1 << 18;  // 1 MiB messages; element 0 = 1: more follow

// Sends 1 MiB messages to `to` until done() (checked before each), then one marked last.
void SendStream(Communicator& comm, int to, uint32_t tag, const std::string& who,
                const std::function<bool()>& done) {
  auto msg = torch::zeros({kStreamFloats}, torch::kFloat32);
  for (int i = 0; i < 1000000; ++i) {
    const bool last = done();
    msg[0] = last ? 0.0f : 1.0f;
    comm.Send(msg, to, tag, who).Wait(comm.timeout());
    if (last) return;
  }
}

// Receives SendStream's messages from `from` up to the one marked last.
void ReceiveStream(Communicator& comm, int from, uint32_t tag, const std::string& who) {
  auto msg = torch::zeros({kStreamFloats}, torch::kFloat32);
  do {
    comm.Recv(msg, from, tag, who).Wait(comm.timeout());
  } while (msg[0].item<float>() != 0);
}

}  // namespace

// Note [Stream load]: on one machine gloo's copies and sums and the kernel's moving of the
// bytes run on the cores the devices compute on. The ranks other than a and b (k of them)
// time the compute loop twice: while a and b idle, then while a streams 1 MiB messages to b
// (for 0.5 s, longer than the loop), three times (the median ratio). With C = speed x ranks
// devices of compute, the load is DevicesFromStretch(C, k, ratio).
double MeasureStreamLoad(Communicator& comm, int a, int b, const ComputeSpeed& speed) {
  const int n = comm.size(), me = comm.rank(), k = n - 2;
  DAPPLE_CHECK(n >= 3 && a != b);
  MatmulLoop loop;
  auto run = [&] { return loop(speed.iterations); };
  const bool computes = me != a && me != b;
  const std::string who = fmt::format("calibrate stream load {} -> {}", a, b);
  if (computes) run();  // warm-up
  constexpr uint32_t kTagStream = 7104;
  std::vector<double> ratios;          // with / without, on a computing rank
  for (int rep = 0; rep < 3; ++rep) {  // the median of 3: one stream is noisy on a loaded host
    comm.Barrier(who + ": without the stream");
    const double without = computes ? run() : 0;
    comm.Barrier(who + ": with the stream");
    if (me == a) {
      const auto start = Clock::now();
      SendStream(comm, b, kTagStream, who, [&] { return SecondsSince(start) > 0.5; });
    } else if (me == b) {
      ReceiveStream(comm, a, kTagStream, who);
    } else {
      ratios.push_back(run() / std::max(without, 1e-9));
    }
  }
  auto ratio = torch::full({1}, computes ? Median(ratios) : 0.0, torch::kFloat64);
  comm.AllReduceSum(ratio, "", who + ": gathering");
  return DevicesFromStretch(speed.speed * n, k, ratio[0].item<double>() / k);
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
// measured times (docs/two-server.md, "Tried and dropped").
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
  r.load_per_rank = DevicesFromStretch(speed.speed * n, k, r.compute_stretch) / 2;
  return r;
}

// Note [Stream load with two ranks]: with only the pair there is nobody else to time, so both
// time the compute loop (at once, as in training) twice: alone, then while a helper thread on
// a streams 1 MiB messages to a helper thread on b, as a pipeline's transfers run beside its
// compute; the median of three ratios, and DevicesFromStretch with k = 2. The helpers stop
// when the loop is done: rank 0's sends a last message marked so.
double MeasureStreamLoadOfPair(Communicator& comm, const ComputeSpeed& speed) {
  DAPPLE_CHECK(comm.size() == 2);
  const int me = comm.rank();
  MatmulLoop loop;
  auto run = [&] { return loop(speed.iterations); };
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
        if (me == 0)
          SendStream(comm, 1, kTagPairStream, who, [&] { return done.load(); });
        else
          ReceiveStream(comm, 0, kTagPairStream, who);
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
  return DevicesFromStretch(speed.speed * comm.size(), 2, ratio[0].item<double>() / comm.size());
}

}  // namespace dapple::internal
