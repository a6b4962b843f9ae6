// `dapple train --elastic` without a failure (tools/dapple/torch/elastic.h): devices
// excluded from the start (--exclude-devices), and a job restarted by an outer launcher with
// fewer processes than its plan needs (Note [Fewer processes than the plan]). The plan
// records the profile and cluster it was made from, so no --profile or --cluster is given.
// With the global batch fixed, every run agrees with the uninterrupted 4-device run to
// rounding (float64).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "dapple/format/plan.h"
#include "dapple/runtime/launch/launcher.h"
#include "train_test_util.h"

namespace dapple::testing {
namespace {

class TrainElasticStart : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir("elastic_start");
    std::string layers;
    for (const std::string& l : kMlpLayers)
      layers += fmt::format(R"({}{{"id": "{}", "forward_ms": 1, "backward_ms": 2,
          "activation_bytes": 1e3, "parameter_bytes": 1e3}})",
                            layers.empty() ? "" : ", ", l);
    std::ofstream(dir_ / "profile.json") << R"({"format": "dapple-profile/1", "model": "mlp",
        "batch_size": 1, "layers": [)" << layers
                                         << "]}";
    std::ofstream(dir_ / "cluster.json") << R"({"format": "dapple-cluster/1", "name": "four",
        "servers": [{"devices": 4}], "device": {"memory_bytes": 1e9, "speed": 1.0},
        "intra_server": {"bandwidth_bytes_per_s": 1e9, "latency_s": 1e-5}})";
    // A 4-device plan that records what it was made from, as `dapple plan` writes it.
    auto plan = nlohmann::json::parse(
        PlanJson({{"fc0", "fc1", {0, 1}}, {"fc2", "head", {2, 3}}}, 2, 4, "gpipe"));
    plan["profile"] = (dir_ / "profile.json").string();
    plan["cluster"] = (dir_ / "cluster.json").string();
    plan_ = WritePlan(dir_, "four", plan.dump(2));
    full_ = RunDapple(Flags(dir_ / "full", plan_, 4), dir_);
    ASSERT_EQ(full_.exit_code, 0) << full_.err;
    ASSERT_EQ(full_.Losses().size(), 6u);
  }

  static std::string Flags(const fs::path& ckpt, const fs::path& plan, int nproc, int steps = 6) {
    return fmt::format(
        "train {} --dtype float64 --data synthetic --seed 3 --optimizer adam --lr 0.05 "
        "--log-json --timeout-s 30 --steps {} --plan {} --checkpoint-dir {}{}",
        kMlpFlags, steps, plan.string(), ckpt.string(),
        nproc > 0 ? fmt::format(" --nproc {}", nproc) : "");
  }

  // `got` ends with the uninterrupted losses of steps from+1 .. from+got.size(), to rounding.
  void ExpectUninterrupted(const std::vector<double>& got, size_t from) {
    auto want = full_.Losses();
    ASSERT_LE(from + got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[from + i], 1e-10 * want[from + i]) << "step " << from + i + 1;
  }

  fs::path dir_, plan_;
  RunResult full_;
};

// Device 2 excluded: the launcher plans for devices 0, 1 and 3 before anything starts,
// trains on 3 processes, and agrees with the 4-device run; the same plan run directly on
// 3 processes gives the same losses bit for bit.
TEST_F(TrainElasticStart, AnExcludedDeviceIsPlannedAwayBeforeTheStart) {
  RunResult r = RunDapple(Flags(dir_ / "ex", plan_, 4) + " --elastic --exclude-devices 2", dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("--elastic: re-planned for 3 devices (device 2 excluded; the cluster's "
                       "devices 0,1,3)"),
            std::string::npos)
      << r.err;
  const fs::path replanned = dir_ / "ex" / "elastic-plan-3.json";
  ASSERT_TRUE(fs::exists(replanned));
  std::printf("the plan without device 2:\n%s\n", Slurp(replanned).c_str());
  Plan p = ReadPlanJson(replanned);
  EXPECT_EQ(p.num_devices(), 3);
  EXPECT_EQ(p.global_batch_size, 8);
  EXPECT_EQ(p.cluster, (dir_ / "cluster.json").string());  // re-plannable again
  ASSERT_EQ(r.Losses().size(), 6u) << r.out;
  ExpectUninterrupted(r.Losses(), 0);
  EXPECT_LT(MaxRelativeDifference(dir_ / "ex" / "step-6", dir_ / "full" / "step-6", kMlpLayers),
            1e-10);
  RunResult three = RunDapple(Flags(dir_ / "three", replanned, 3), dir_);
  ASSERT_EQ(three.exit_code, 0) << three.err;
  EXPECT_EQ(three.Losses(), r.Losses());
}

TEST_F(TrainElasticStart, BadExclusionsAreOneLineExitTwo) {
  struct Case {
    std::string flags, message;
  } cases[] = {
      {" --elastic --exclude-devices 0,1,2,3",
       "--elastic: devices 0,1,2,3 excluded: no devices left"},
      {" --elastic --exclude-devices 4", "--exclude-devices 4: device 4 is not one of the job's 4"},
      {" --elastic --exclude-devices 1,x", "--exclude-devices 1,x: 'x' is not a device index"},
      {" --elastic --exclude-devices 1,1", "--exclude-devices 1,1: device 1 is named twice"},
      {" --exclude-devices 1", "--exclude-devices needs --elastic"},
  };
  for (const Case& c : cases) {
    RunResult r = RunDapple(Flags(dir_ / "bad", plan_, 4) + c.flags, dir_);
    EXPECT_EQ(r.exit_code, 2) << c.flags;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.flags << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "bad" / "latest"));
}

// A job of two nodes (two launchers on the loopback) runs 2 steps; then node 1 "does not come
// back": the outer launcher starts node 0 alone with `--resume auto --elastic`, which plans for
// 2 processes and continues to step 4; then an external launcher (this test: RANK and
// WORLD_SIZE set by hand) starts 3 ranks, which plan for 3 and continue to step 6. Without
// --elastic the shortfall is one line, exit code 2.
TEST_F(TrainElasticStart, FewerProcessesThanThePlanUnderAnOuterLauncher) {
  const fs::path ckpt = dir_ / "nodes";
  const int port = PickFreePort();
  const std::string two_nodes = fmt::format("{} {} --nproc 2 --nnodes 2 --master-port {}",
                                            DAPPLE_BINARY, Flags(ckpt, plan_, 0, 2), port);
  int rc = std::system(fmt::format("{0} --node-rank 1 >{1}/n1.log 2>&1 & {0} --node-rank 0 "
                                   ">{1}/n0.log 2>&1; rc=$?; wait $! || rc=$?; exit $rc",
                                   two_nodes, dir_.string())
                           .c_str());
  ASSERT_EQ(rc, 0) << Slurp(dir_ / "n0.log") << Slurp(dir_ / "n1.log");
  ASSERT_EQ(Slurp(ckpt / "latest"), "step-2\n");

  // Node 0 alone, without --elastic: the plan's 4 devices are not there.
  RunResult r = RunDapple(Flags(ckpt, plan_, 2, 4) + " --resume auto", dir_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("the plan uses 4 devices but the job has 2 processes"), std::string::npos)
      << r.err;
  r = RunDapple(Flags(ckpt, plan_, 2, 4) + " --resume auto --elastic", dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("--elastic: re-planned for 2 devices (the job has 2 processes, but " +
                       plan_.string() + " uses 4 devices; the cluster's devices 0,1)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--resume auto: resuming from " + (ckpt / "step-2").string()),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(fs::exists(ckpt / "elastic-plan-2.json"));
  // The model the launcher and each rank load for the planner is the one they check the plan
  // against and the rank trains: one load each (Note [Stage-local models]).
  for (const auto& s : r.Summary()["stages"]) EXPECT_EQ(s["model_loads"].get<int>(), 1) << r.out;
  for (const auto& j : r.lines) {
    if (j.contains("launcher")) {
      EXPECT_EQ(j["launcher"]["model_loads"].get<int>(), 1) << r.out;
    }
  }
  ASSERT_EQ(r.Losses().size(), 2u) << r.out;
  ExpectUninterrupted(r.Losses(), 2);

  // Three ranks started by hand, as mpirun or a Slurm script would.
  const std::string rank_cmd =
      fmt::format("WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT={} {} {} --resume auto --elastic",
                  PickFreePort(), DAPPLE_BINARY, Flags(ckpt, plan_, 0, 6));
  rc = std::system(fmt::format("RANK=1 LOCAL_RANK=1 {0} >{1}/r1.log 2>&1 & RANK=2 LOCAL_RANK=2 "
                               "{0} >{1}/r2.log 2>&1 & RANK=0 LOCAL_RANK=0 {0} >{1}/r0.out "
                               "2>{1}/r0.err; rc=$?; wait || rc=$?; exit $rc",
                               rank_cmd, dir_.string())
                       .c_str());
  RunResult ranks;
  ranks.out = Slurp(dir_ / "r0.out");
  ranks.err = Slurp(dir_ / "r0.err");
  ASSERT_EQ(rc, 0) << ranks.err << Slurp(dir_ / "r1.log") << Slurp(dir_ / "r2.log");
  EXPECT_NE(ranks.err.find("--elastic: re-planned for 3 devices (the job has 3 processes"),
            std::string::npos)
      << ranks.err;
  // Only rank 0 announces the plan; the others made the same one in memory.
  EXPECT_EQ(Slurp(dir_ / "r1.log").find("re-planned"), std::string::npos);
  ASSERT_TRUE(fs::exists(ckpt / "elastic-plan-3.json"));
  std::istringstream lines(ranks.out);
  std::vector<double> losses;
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("loss")) losses.push_back(j["loss"].get<double>());
  }
  ASSERT_EQ(losses.size(), 2u) << ranks.out;
  ExpectUninterrupted(losses, 4);
  EXPECT_LT(MaxRelativeDifference(ckpt / "step-6", dir_ / "full" / "step-6", kMlpLayers), 1e-10);
}

}  // namespace
}  // namespace dapple::testing
