// Note [Devices as cores]: the launcher pins local rank i to the i-th set of the allowed
// cores when the processes' threads fit, and leaves processes that would share cores (or
// every process, with pin_cores off or DAPPLE_PIN_CORES=0) on the launcher's cores. Each
// child reports the cores the kernel lets it run on (/proc/self/status).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "dapple/common/core_sets.h"
#include "dapple/common/machine.h"
#include "dapple/runtime/launch/launcher.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;

// Runs `nproc` shells that write their Cpus_allowed_list to <dir>/<LOCAL_RANK>; returns them.
std::vector<std::string> ChildCores(int nproc, bool pin) {
  fs::path dir = fs::temp_directory_path() / ("dapple_pin_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  LaunchOptions o;
  o.nproc_per_node = nproc;
  o.master_port = PickFreePort();
  o.pin_cores = pin;
  o.argv = {"/bin/sh", "-c",
            "sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status > \"" + dir.string() +
                "/$LOCAL_RANK\""};
  EXPECT_EQ(LaunchLocal(o), 0);
  std::vector<std::string> out;
  for (int i = 0; i < nproc; ++i) {
    std::ifstream in(dir / std::to_string(i));
    std::string line;
    std::getline(in, line);
    out.push_back(line);
  }
  fs::remove_all(dir);
  return out;
}

// What the launcher should give each of `nproc` processes: their split of the allowed cores.
std::vector<std::string> Expected(int nproc) {
  int threads = ThreadsPerProcess(ThisMachine().cores, nproc);
  if (const char* omp = std::getenv("OMP_NUM_THREADS")) threads = std::max(1, std::atoi(omp));
  auto sets = SplitCores(AllowedCores(), nproc, threads);
  std::vector<std::string> out;
  for (int i = 0; i < nproc; ++i)
    out.push_back(sets ? FormatCores((*sets)[i]) : FormatCores(AllowedCores()));
  return out;
}

TEST(LauncherPinning, EachRankRunsOnItsOwnCores) {
  const CoreSet allowed = AllowedCores();
  if (allowed.size() < 2) GTEST_SKIP() << "one core: nothing to split";
  auto cores = ChildCores(2, true);
  EXPECT_EQ(cores, Expected(2));
  EXPECT_NE(cores[0], cores[1]);
}

TEST(LauncherPinning, ProcessesThatWouldShareCoresAndTheSwitchLeaveThemUnpinned) {
  const std::string all = FormatCores(AllowedCores());
  const int many = static_cast<int>(AllowedCores().size()) + 1;  // more processes than cores
  for (const auto& c : ChildCores(many, true)) EXPECT_EQ(c, all);
  for (const auto& c : ChildCores(2, false)) EXPECT_EQ(c, all);
  setenv("DAPPLE_PIN_CORES", "0", 1);
  auto off = ChildCores(2, true);
  unsetenv("DAPPLE_PIN_CORES");
  for (const auto& c : off) EXPECT_EQ(c, all);
}

}  // namespace
}  // namespace dapple
