// CommWork::RecordCompletion: the completion time of an asynchronous collective, taken when it
// completes rather than when its caller waits (the trainer's bucket events rely on it).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "dapple/common/clock.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/launch/launcher.h"

namespace dapple {
namespace {

TEST(CommWork, RecordsWhenTheOperationCompletedNotWhenWaited) {
  DistEnv env;
  env.master_port = PickFreePort();
  Communicator comm(env, std::chrono::milliseconds(10000));
  auto t = torch::ones({1024});
  const double before = NowMs();
  CommWork w = comm.AllReduceSumAsync(t, "", "comm work test: allreduce");
  w.RecordCompletion();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the caller is late
  w.Wait(std::chrono::milliseconds(10000));
  const double waited = NowMs();
  EXPECT_GE(w.CompletedMs(), before);
  // One rank's sum completes at once; its time is long before the late wait returned.
  EXPECT_LT(w.CompletedMs(), waited - 25);
  EXPECT_DOUBLE_EQ(t[0].item<double>(), 1.0);
  // Not recorded: negative.
  CommWork plain = comm.AllReduceSumAsync(t, "", "comm work test: plain");
  plain.Wait(std::chrono::milliseconds(10000));
  EXPECT_LT(plain.CompletedMs(), 0);
}

}  // namespace
}  // namespace dapple
