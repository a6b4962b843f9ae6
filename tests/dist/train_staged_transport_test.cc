// Note [Transport by device] (runtime/comm/transport.h): the staged transport, which carries CUDA
// tensors through host copies where ranks share a GPU, is checked here on the CPU: with
// DAPPLE_TEST_STAGE_THROUGH_HOST=1 every send, receive and collective goes through a host
// clone and is copied back when waited for. Training under it must give exactly the losses
// of plain Gloo: activations and gradients between stages, the overlapped allreduce, and a
// sharded optimizer's reduce-scatter (alltoall) and all-gather all take the staged path.
#include <gtest/gtest.h>

#include <string>

#include "train_test_util.h"

namespace dapple::testing {
namespace {

TEST(TrainStagedTransport, SameLossesAsPlainGloo) {
  fs::path dir = TestDir("staged");
  nlohmann::json plan = nlohmann::json::parse(
      PlanJson({{"fc0", "fc1", {0, 1}}, {"fc2", "head", {2, 3}}}, 4, 2, "dapple-a"));
  plan["stages"][0]["shard_optimizer"] = true;
  plan["allreduce_overlap"] = true;
  fs::path p = WritePlan(dir, "plan", plan.dump(2));
  const std::string args =
      "train --model mlp --opt input=7 --opt hidden=16 --opt layers=3 --opt classes=5 "
      "--dtype float64 --data synthetic --seed 5 --steps 4 --optimizer adam --bucket-mb 0.002 "
      "--nproc 4 --log-json --timeout-s 60 --plan " +
      p.string();
  RunResult gloo = RunDapple(args, dir);
  ASSERT_EQ(gloo.exit_code, 0) << gloo.err;
  RunResult staged = RunDapple(args, dir, "DAPPLE_TEST_STAGE_THROUGH_HOST=1");
  ASSERT_EQ(staged.exit_code, 0) << staged.err;
  ASSERT_EQ(gloo.Losses().size(), 4u);
  EXPECT_EQ(staged.Losses(), gloo.Losses());
}

}  // namespace
}  // namespace dapple::testing
