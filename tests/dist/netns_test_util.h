// Helpers for the tests that use scripts/netns.sh: run a shell command and capture its
// output, and names and addresses unique to one test process (tests may run in parallel).
#pragma once

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace dapple::testing {

struct CommandResult {
  int rc = -1;
  std::string output;  // stdout and stderr together
};

// Runs `cmd` under /bin/sh with stderr folded into stdout.
inline CommandResult RunCommand(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline std::string NetnsScript() { return fmt::format("{}/scripts/netns.sh", DAPPLE_SOURCE_DIR); }

// A namespace prefix and /30 subnet of this test process, `tag` (0..9) telling tests apart,
// and a state directory of its own.
struct TestNet {
  std::string prefix;
  std::string subnet;
  std::string state_dir;

  explicit TestNet(int tag) {
    int pid = static_cast<int>(getpid());
    prefix = fmt::format("dt{}x{}", tag, pid % 100000);
    subnet = fmt::format("10.{}.{}", 200 + tag, pid % 250);
    state_dir = (std::filesystem::temp_directory_path() / fmt::format("dapple-netns-test-{}", pid))
                    .string();
  }
  // The script's options and environment for this test.
  std::string Env() const { return fmt::format("DAPPLE_NETNS_STATE_DIR={} ", state_dir); }
  std::string Args() const { return fmt::format("--prefix {} --subnet {}", prefix, subnet); }
  std::string Script(const std::string& rest) const {
    // fmt::format, not a chain of +: GCC 12's -Warray-bounds misfires on such chains at -O2.
    return fmt::format("{}{} {} {}", Env(), NetnsScript(), Args(), rest);
  }
  std::string Ns(int s) const { return fmt::format("{}-s{}", prefix, s); }
  std::string Addr(int s) const { return fmt::format("{}.{}", subnet, s + 1); }
};

// True when `ip netns list` shows `name`.
inline bool NamespaceExists(const std::string& name) {
  CommandResult r = RunCommand("ip netns list");
  std::string s = "\n" + r.output;
  return s.find("\n" + name + " ") != std::string::npos ||
         s.find("\n" + name + "\n") != std::string::npos;
}

}  // namespace dapple::testing
