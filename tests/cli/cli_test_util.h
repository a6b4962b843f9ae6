// Shared by the CLI tests: runs the built `dapple` binary in a per-test temporary folder
// and captures its exit code, stdout and stderr.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "output_lines.h"

namespace dapple::testing {

struct CliRun {
  int code = -1;
  std::string out, err;
};

inline std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fixture with a fresh folder dir_ per test (removed afterwards) and Dapple(args).
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        std::filesystem::temp_directory_path() / ("dapple_cli_" + std::to_string(::getpid()) + "_" +
                                                  info->test_suite_name() + "_" + info->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `dapple <args>` (a shell word list) and returns what it did.
  CliRun Dapple(const std::string& args) {
    std::filesystem::path out = dir_ / "stdout", err = dir_ / "stderr";
    std::string cmd =
        fmt::format("{} {} >{} 2>{}", DAPPLE_BINARY, args, out.string(), err.string());
    int status = std::system(cmd.c_str());
    CliRun r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = Slurp(out);
    r.err = Slurp(err);
    return r;
  }

  std::filesystem::path dir_;
};

}  // namespace dapple::testing
