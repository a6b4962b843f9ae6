// Note [One deadline per wait chain]: waits that share a Deadline give up within one
// timeout of the chain's start, however many there are. Two ranks in two threads of this
// process: rank 0 sends four messages, each after a pause of 40% of the timeout; rank 1
// waits for all four. With one timeout per wait every wait succeeds (4 x 0.4 = 1.6
// timeouts in all); with one deadline for the chain the third wait fails, before 1.6.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include "dapple/common/error.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/launch/launcher.h"

namespace dapple {
namespace {

constexpr auto kTimeout = std::chrono::milliseconds(1000);
constexpr auto kLongWait = std::chrono::milliseconds(10000);
constexpr int kMessages = 4;

struct ChainOutcome {
  bool failed = false;
  double seconds = 0;  // until the chain returned or failed
  std::string message;
};

// Runs the exchange once on the pair; `one_deadline` picks how rank 1 waits. A gloo
// receive that times out closes its pair, so after a failed chain the remaining sends fail
// too: the sender's errors count only while the chain is expected to succeed.
ChainOutcome Exchange(Communicator& sender, Communicator& receiver, uint32_t first_tag,
                      bool one_deadline) {
  std::vector<CommWork> recvs;
  for (int i = 0; i < kMessages; ++i)
    recvs.push_back(
        receiver.Recv(torch::zeros({4}), 0, first_tag + i, "test: message " + std::to_string(i)));
  std::string send_error;
  std::thread send_thread([&] {
    for (int i = 0; i < kMessages; ++i) {
      std::this_thread::sleep_for(kTimeout * 4 / 10);
      try {
        sender.Send(torch::full({4}, i + 1.0), 1, first_tag + i, "test: send").Wait(kLongWait);
      } catch (const CommError& e) {
        if (send_error.empty()) send_error = e.what();
      }
    }
  });
  ChainOutcome out;
  const auto start = std::chrono::steady_clock::now();
  const Deadline deadline(kTimeout);
  try {
    for (auto& w : recvs) {
      if (one_deadline) {
        w.Wait(deadline);
      } else {
        w.Wait(kTimeout);
      }
    }
  } catch (const CommError& e) {
    out.failed = true;
    out.message = e.what();
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  send_thread.join();
  if (!out.failed) {
    EXPECT_EQ(send_error, "");
  }
  return out;
}

TEST(Deadline, AChainOfWaitsGivesUpWithinOneTimeout) {
  DistEnv env0, env1;
  env0.world_size = env1.world_size = 2;
  env1.rank = 1;
  env0.master_port = env1.master_port = PickFreePort();
  std::optional<Communicator> c0, c1;
  std::thread t0([&] { c0.emplace(env0, kLongWait); });
  std::thread t1([&] { c1.emplace(env1, kLongWait); });
  t0.join();
  t1.join();

  // Control: one timeout per wait, as before the deadline: every wait succeeds although the
  // chain takes longer than one timeout. (So the exchange really is slower than a timeout.)
  ChainOutcome per_wait = Exchange(*c0, *c1, 0, /*one_deadline=*/false);
  EXPECT_FALSE(per_wait.failed) << per_wait.message;
  EXPECT_GT(per_wait.seconds, 1.2);

  // One deadline: the chain fails. It fails once the deadline passed, after the second
  // message (0.8 timeouts) and well before the fourth would arrive (1.6 timeouts).
  ChainOutcome chained = Exchange(*c0, *c1, 100, /*one_deadline=*/true);
  EXPECT_TRUE(chained.failed);
  EXPECT_GE(chained.seconds, 0.95);
  EXPECT_LT(chained.seconds, 2.0);  // generous: two timeouts, what two failing waits took
  EXPECT_NE(chained.message.find("test: message 2"), std::string::npos) << chained.message;
  EXPECT_NE(chained.message.find("timeout 1.0 s"), std::string::npos) << chained.message;
}

TEST(Deadline, LeftShrinksAndNeverReachesZero) {
  Deadline d(std::chrono::milliseconds(50));
  EXPECT_LE(d.Left().count(), 50);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_EQ(d.Left().count(), 1);  // c10d reads 0 as "no timeout"
  EXPECT_GE(d.ElapsedSeconds(), 0.08);
}

}  // namespace
}  // namespace dapple
