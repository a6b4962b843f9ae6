// `dapple simulate` on the built binary: a hand-written plan for BERT-48 on paper-a runs,
// --json has the documented fields, --trace/--svg are written; bad input is one line on
// stderr, exit code 2, and no output file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/cli_test_util.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Result {
  int code = -1;
  std::string out, err;
};

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using testing::Lines;

// Two stages of BERT-48 (53 layers), one per paper-a server, m = 8, M = 8.
constexpr const char* kPlan = R"({"format": "dapple-plan/1", "global_batch_size": 64,
  "micro_batch_size": 8, "schedule": "dapple-a",
  "stages": [{"first_layer": 0, "last_layer": 26, "devices": [0, 1, 2, 3, 4, 5, 6, 7]},
             {"first_layer": 27, "last_layer": 52, "devices": [8, 9, 10, 11, 12, 13, 14, 15]}]})";

class SimulateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dapple_simulate_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }

  Result Dapple(const std::string& args) {
    fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    std::string cmd =
        std::string(DAPPLE_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
    int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = Slurp(out);
    r.err = Slurp(err);
    return r;
  }

  // `simulate` of `plan_text` on BERT-48 / paper-a with extra flags.
  Result Simulate(const std::string& plan_text, const std::string& flags = "") {
    fs::path plan = Write("plan.json", plan_text);
    std::string cluster = flags.find("--cluster") == std::string::npos ? "--cluster paper-a " : "";
    return Dapple("simulate --profile " + std::string(DAPPLE_DATA_DIR) +
                  "/profiles/dapple/bert-48-pbs-2.txt " + cluster + "--plan " + plan.string() +
                  " " + flags);
  }

  fs::path dir_;
};

TEST_F(SimulateCli, SummaryTable) {
  Result r = Simulate(kPlan);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("bert-48-pbs-2 (53 layers, PBS 2) on paper-a"));
  EXPECT_THAT(r.out, HasSubstr("0-26 input_ids .. "));
  EXPECT_THAT(r.out, HasSubstr("27-52 "));
  EXPECT_THAT(r.out, HasSubstr("0-7"));
  EXPECT_THAT(r.out, HasSubstr("8-15"));
  EXPECT_THAT(r.out, HasSubstr("/ 16.0"));  // peak memory vs the device's 16 GB
  EXPECT_THAT(r.out, HasSubstr("iteration time"));
  EXPECT_THAT(r.out, HasSubstr("speedup"));
  EXPECT_THAT(r.out, HasSubstr("bubble fraction"));
}

TEST_F(SimulateCli, JsonFields) {
  Result r = Simulate(kPlan, "--json");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["iteration_ms"].get<double>(), 0);
  EXPECT_GT(j["speedup"].get<double>(), 1);
  double bubble = j["bubble_fraction"].get<double>();
  EXPECT_GT(bubble, 0);
  EXPECT_LT(bubble, 1);
  EXPECT_EQ(j["schedule"], "dapple-a");
  EXPECT_EQ(j["fits_memory"], true);
  ASSERT_EQ(j["devices"].size(), 16u);
  for (const auto& d : j["devices"]) {
    EXPECT_NEAR(d["busy_ms"].get<double>() + d["bubble_ms"].get<double>(),
                j["iteration_ms"].get<double>(), 1e-6);
    EXPECT_GT(d["peak_memory_bytes"].get<double>(), d["static_memory_bytes"].get<double>());
    EXPECT_EQ(d["peak_in_flight"], d["stage"] == 0 ? 2 : 1);  // dapple-a, S = 2
  }
  ASSERT_EQ(j["stages"].size(), 2u);
  EXPECT_EQ(j["stages"][1]["first_layer"], 27);
  EXPECT_GT(j["stages"][0]["send_ms"].get<double>(), 0);
  EXPECT_EQ(j["stages"][1]["send_ms"].get<double>(), 0);
  EXPECT_GT(j["stages"][0]["allreduce_ms"].get<double>(), 0);

  Result g = Simulate(kPlan, "--json --schedule gpipe");
  ASSERT_EQ(g.code, 0) << g.err;
  nlohmann::json gj = nlohmann::json::parse(g.out);
  EXPECT_EQ(gj["schedule"], "gpipe");
  for (const auto& d : gj["devices"]) EXPECT_EQ(d["peak_in_flight"], 8);
}

TEST_F(SimulateCli, WritesTraceAndSvg) {
  fs::path trace = dir_ / "t.json", svg = dir_ / "t.svg";
  Result r = Simulate(kPlan, "--no-overlap --trace " + trace.string() + " --svg " + svg.string());
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json t = nlohmann::json::parse(Slurp(trace));
  int complete = 0;
  for (const auto& e : t["traceEvents"]) complete += e["ph"] == "X";
  // 16 devices x (8 F + 8 B + AR + STEP) + 8 activation and 8 gradient transfers.
  EXPECT_EQ(complete, 16 * 18 + 16);
  EXPECT_THAT(Slurp(svg), HasSubstr("</svg>"));

  // With the (default) overlapped allreduce, each bucket is an extra "AR b<k>" event.
  Result o = Simulate(kPlan, "--trace " + trace.string());
  ASSERT_EQ(o.code, 0) << o.err;
  nlohmann::json ot = nlohmann::json::parse(Slurp(trace));
  int buckets = 0, overlapped = 0;
  for (const auto& e : ot["traceEvents"]) {
    overlapped += e["ph"] == "X";
    buckets += e["ph"] == "X" && e["name"].get<std::string>().rfind("AR b", 0) == 0;
  }
  EXPECT_GT(buckets, 0);
  EXPECT_EQ(overlapped, 16 * 18 + 16 + buckets);
}

// --clip-grad-norm: every device's STEP waits for the NORM allreduce, which starts when the
// last device reaches its STEP; a clip that is not positive is one line, exit 2.
TEST_F(SimulateCli, ClipGradNormChargesTheNormAllReduce) {
  fs::path trace = dir_ / "t.json";
  Result r = Simulate(kPlan, "--clip-grad-norm 1 --json --trace " + trace.string());
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json t = nlohmann::json::parse(Slurp(trace));
  double last_arrival = 0, norm_end = -1;
  int norms = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double start = e["ts"].get<double>(), end = start + e["dur"].get<double>();
    if (e["name"] == "NORM") {
      ++norms;
      norm_end = end;
    } else if (e["name"] != "STEP") {
      last_arrival = std::max(last_arrival, end);
    }
  }
  EXPECT_EQ(norms, 16);
  EXPECT_GE(norm_end, last_arrival);
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "STEP") {
      EXPECT_NEAR(e["ts"].get<double>(), norm_end, 1e-3);  // microseconds
    }
  }
  Result plain = Simulate(kPlan, "--json");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_GT(nlohmann::json::parse(r.out)["iteration_ms"].get<double>(),
            nlohmann::json::parse(plain.out)["iteration_ms"].get<double>());

  Result bad = Simulate(kPlan, "--clip-grad-norm -1");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--clip-grad-norm -1: must be positive"));
  EXPECT_EQ(Lines(bad.err), 1);
}

TEST_F(SimulateCli, WarnsWhenThePlanDoesNotFitMemory) {
  Result r = Simulate(kPlan, "--memory-gb 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: the plan does not fit memory"));
  EXPECT_EQ(Lines(r.err), 1);
  EXPECT_THAT(r.out, HasSubstr("/ 2.0"));
}

struct BadInput {
  const char* what;
  std::string plan;
  std::string flags;
  std::string message;  // a substring of the one line on stderr: the file and field, or flag
};

TEST_F(SimulateCli, BadInputIsOneLineExitTwoAndNoOutputFile) {
  const std::string stages_ok =
      R"("stages": [{"first_layer": 0, "last_layer": 26, "devices": [0]},
                    {"first_layer": 27, "last_layer": 52, "devices": [1]}]})";
  const std::string head =
      R"({"format": "dapple-plan/1", "global_batch_size": 8, "micro_batch_size": 2, )";
  const BadInput cases[] = {
      {"malformed JSON", R"({"global_batch_size": 8, "stages": [)", "",
       "plan.json: malformed JSON at byte"},
      {"device out of range",
       head + R"("stages": [{"first_layer": 0, "last_layer": 26, "devices": [0]},
                            {"first_layer": 27, "last_layer": 52, "devices": [16]}]})",
       "", "plan.json: stages[1].devices[0]: device 16 is not in cluster"},
      {"overlapping stages",
       head + R"("stages": [{"first_layer": 0, "last_layer": 30, "devices": [0]},
                            {"first_layer": 27, "last_layer": 52, "devices": [1]}]})",
       "", "plan.json: stages[1].first_layer: 27 but stage 0 ended at layer 30"},
      {"skipped layers", head + R"("stages": [{"first_layer": 0, "last_layer": 20, "devices": [0]},
                            {"first_layer": 27, "last_layer": 52, "devices": [1]}]})",
       "", "plan.json: stages[1].first_layer: 27 but stage 0 ended at layer 20"},
      {"shared device", head + R"("stages": [{"first_layer": 0, "last_layer": 26, "devices": [0]},
                            {"first_layer": 27, "last_layer": 52, "devices": [0]}]})",
       "", "plan.json: stages[1].devices[0]: device 0 is already used by stage 0"},
      {"GBS not divisible",
       R"({"format": "dapple-plan/1", "global_batch_size": 9, "micro_batch_size": 2, )" + stages_ok,
       "", "plan.json.micro_batch_size: global_batch_size 9 is not divisible by 2"},
      {"unknown schedule", head + stages_ok, "--schedule zigzag",
       "--schedule: unknown schedule 'zigzag'"},
      {"unknown cluster", head + stages_ok, "--cluster paper-z", "--cluster: cluster 'paper-z'"},
      {"trace folder missing", head + stages_ok, "--trace /nonexistent-dir/t.json",
       "--trace /nonexistent-dir/t.json: folder"},
      {"negative memory", head + stages_ok, "--memory-gb -1", "--memory-gb: must be positive"},
  };
  for (const BadInput& c : cases) {
    fs::path trace = dir_ / "t.json";
    std::string flags = c.flags;
    if (flags.find("--trace") == std::string::npos) flags += " --trace " + trace.string();
    Result r = Simulate(c.plan, flags);
    EXPECT_EQ(r.code, 2) << c.what << ": " << r.err;
    EXPECT_EQ(Lines(r.err), 1) << c.what << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.what;
    EXPECT_EQ(r.out, "") << c.what;
    EXPECT_FALSE(fs::exists(trace)) << c.what;
    for (const auto& e : fs::directory_iterator(dir_))  // no temporary left behind either
      EXPECT_THAT(e.path().filename().string(), ::testing::Not(HasSubstr(".tmp"))) << c.what;
  }
}

TEST_F(SimulateCli, MissingPlanFile) {
  Result r = Dapple("simulate --profile " + std::string(DAPPLE_DATA_DIR) +
                    "/profiles/dapple/bert-48-pbs-2.txt --cluster paper-a --plan " +
                    (dir_ / "absent.json").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("absent.json"));
}

}  // namespace
}  // namespace dapple
