// Note [State per parameter] on the built binary: the memory a stage holds per parameter
// byte follows the optimizer the profile timed: weights, gradients and the step's scratch (3),
// plus SGD's momentum (4 in all), nothing more without momentum (3), Adam's two moments (5);
// a profile that names no optimizer keeps the paper's 4.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"

namespace dapple {
namespace {

using testing::CliRun;

constexpr double kParamBytes = 3e6;  // the two layers' parameters together

class StateFactorCli : public testing::CliTest {
 protected:
  // A two-layer profile; `optimizer` empty: no settings (as a converted text profile).
  std::string Profile(const std::string& optimizer, const std::string& options) {
    std::string settings, metadata;
    if (!optimizer.empty()) {
      settings = fmt::format(
          R"(, "settings": {{"threads": 1, "batch_sizes": [1], "optimizer": "{}",
              "caches": "warm", "machine": {{"cpu": "test", "cores": 1, "memory_bytes": 1e9,
              "hostname": "test", "machine_id": "test"}}}})",
          optimizer);
      metadata = fmt::format(R"(, "metadata": {{"optimizer_options": "{}"}})", options);
    }
    std::filesystem::path p = dir_ / ("profile-" + optimizer + ".json");
    std::ofstream(p) << R"({"format": "dapple-profile/1", "model": "two", "batch_size": 1,
        "layers": [{"id": "a", "forward_ms": 1, "backward_ms": 2, "activation_bytes": 1e3,
                    "parameter_bytes": 1e6},
                   {"id": "b", "forward_ms": 1, "backward_ms": 2, "activation_bytes": 1e3,
                    "parameter_bytes": 2e6}])"
                     << settings << metadata << "}";
    return p.string();
  }
  // The static memory of the one device of a one-stage plan.
  double StaticBytes(const std::string& profile) {
    std::filesystem::path plan = dir_ / "plan.json";
    std::ofstream(plan) << R"({"format": "dapple-plan/1", "global_batch_size": 2,
        "micro_batch_size": 1, "schedule": "dapple-a",
        "stages": [{"first_layer": 0, "last_layer": 1, "devices": [0]}]})";
    CliRun r = Dapple("simulate --profile " + profile + " --cluster paper-b --json --plan " +
                      plan.string());
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out)["devices"][0]["static_memory_bytes"].get<double>();
  }
};

TEST_F(StateFactorCli, FollowsTheProfiledOptimizer) {
  EXPECT_DOUBLE_EQ(StaticBytes(Profile("sgd", "lr 0.01, momentum 0.9, weight decay default")),
                   4 * kParamBytes);
  EXPECT_DOUBLE_EQ(StaticBytes(Profile("sgd", "lr 0.01, momentum 0, weight decay default")),
                   3 * kParamBytes);
  EXPECT_DOUBLE_EQ(StaticBytes(Profile("adam", "lr 0.001, weight decay default")), 5 * kParamBytes);
  EXPECT_DOUBLE_EQ(StaticBytes(Profile("", "")), 4 * kParamBytes);
}

}  // namespace
}  // namespace dapple
