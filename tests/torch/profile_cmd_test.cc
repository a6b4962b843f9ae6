// `dapple profile` end to end: a small profile that the planner's readers accept in both
// formats, and bad input answered with one line and exit code 2.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "dapple/format/profile.h"

namespace dapple {
namespace {

struct Result {
  int code;
  std::string output;  // stdout and stderr
};

Result RunDapple(const std::string& args) {
  std::string cmd = fmt::format("{} {} 2>&1", DAPPLE_BINARY, args);
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::filesystem::path Temp(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("dapple_profile_cmd_" + std::to_string(::getpid()) + "_" + name);
}

int Lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(ProfileCommand, WritesJsonAndPipeDream) {
  auto json = Temp("p.json"), text = Temp("p.txt");
  Result r = RunDapple(
      "profile --model mlp --opt hidden=16 --layers 3 --batch 4 --batches 2,4 "
      "--warmup 0 --repeat 1 --threads 1 -o " +
      json.string());
  ASSERT_EQ(r.code, 0) << r.output;
  Profile p = ReadProfileJson(json);
  EXPECT_EQ(p.num_layers(), 4);  // 3 hidden + head: --layers reached the model
  EXPECT_EQ(p.batch_sizes, (std::vector<int>{2, 4}));
  EXPECT_EQ(p.metadata.at("option.hidden"), "16");
  EXPECT_EQ(p.metadata.at("threads"), "1");
  EXPECT_EQ(p.metadata.at("optimizer"), "sgd");  // dapple train's default
  for (const LayerProfile& l : p.layers) EXPECT_GT(l.update_ms, 0) << l.id;
  r = RunDapple(
      "profile --model mlp --opt hidden=16 --layers 1 --batch 2 --warmup 0 --repeat 1 "
      "--threads 1 --optimizer adamw -o " +
      json.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(ReadProfileJson(json).metadata.at("optimizer"), "adamw");
  r = RunDapple(
      "profile --model gpt --opt layers=1 --opt hidden=16 --batch 2 --warmup 0 --repeat 1 "
      "--format pipedream -o " +
      text.string());
  ASSERT_EQ(r.code, 0) << r.output;
  Profile q = ReadPipeDreamGraph(text, 2);
  EXPECT_EQ(q.num_layers(), 3);
  std::filesystem::remove(json);
  std::filesystem::remove(text);
}

// The loop profile -> plan: a profile measured here plans on the `local` cluster.
TEST(ProfileCommand, ProfilePlansOnLocalCluster) {
  auto profile = Temp("loop.json"), plan = Temp("loop-plan.json");
  Result r = RunDapple(
      "profile --model gpt --opt layers=3 --opt hidden=32 --batch 4 --warmup 0 "
      "--repeat 2 --threads 1 -o " +
      profile.string());
  ASSERT_EQ(r.code, 0) << r.output;
  r = RunDapple("plan --profile " + profile.string() +
                " --cluster local --global-batch 16 --no-baselines -o " + plan.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(plan));
  std::filesystem::remove(profile);
  std::filesystem::remove(plan);
}

TEST(ProfileCommand, BadInputIsOneLineExitTwo) {
  auto out = Temp("bad.json");
  for (std::string args :
       {"--model mlp --batch 0", "--model alexnet --batch 2", "--model mlp --opt depth=3 --batch 2",
        "--model mlp --depth 3 --batch 2", "--model mlp --batch 2 --batches 0,2",
        "--model mlp --batch 2 --format xml", "--model mlp --batch 2 --optimizer lamb"}) {
    Result r = RunDapple("profile " + args + " -o " + out.string());
    EXPECT_EQ(r.code, 2) << args << ": " << r.output;
    EXPECT_EQ(Lines(r.output), 1) << args << ": " << r.output;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
}

// Note [Sizes the model refuses] (profiler.cc): BatchNorm refuses one sample per channel in
// training. The default sizes (1, 2, 4, ...) leave batch 1 out with a note; a size the user
// asks for is one line naming the layer, exit 2, and no file.
TEST(ProfileCommand, BatchSizesTheModelRefuses) {
  const auto model = Temp("bn.pt"), out = Temp("bn.json");
  const std::string write = fmt::format(
      "{} -c \"import torch, torch.nn as nn; torch.jit.script(nn.Sequential(nn.Linear(8, 4), "
      "nn.BatchNorm1d(4), nn.Linear(4, 3))).save('{}')\"",
      DAPPLE_PYTHON, model.string());
  ASSERT_EQ(std::system(write.c_str()), 0) << write;
  const std::string common = fmt::format(
      "profile --model {} --input-shape 8 --loss cross-entropy --warmup 0 --repeat 1 "
      "--threads 1 --batch 4",
      model.string());
  Result r = RunDapple(common + " -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("note: batch 1 left out of the profile: layer 1 refuses it"),
            std::string::npos)
      << r.output;
  Profile p = ReadProfileJson(out);
  EXPECT_EQ(p.batch_sizes, (std::vector<int>{2, 4, 8, 16}));
  std::filesystem::remove(out);
  r = RunDapple(common + " --batches 1,4 -o " + out.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(Lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("layer 1 refuses batch 1: builtins.ValueError: Expected more than 1 "
                          "value per channel"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));
  std::filesystem::remove(model);
}

}  // namespace
}  // namespace dapple
