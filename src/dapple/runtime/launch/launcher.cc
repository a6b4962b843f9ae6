// LaunchLocal: fork/exec of N children with the launcher variables, wait, stop the rest
// when one fails.
#include "dapple/runtime/launch/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "dapple/common/core_sets.h"
#include "dapple/common/error.h"
#include "dapple/common/machine.h"

extern char** environ;

namespace dapple {
namespace {

// Children of the running launcher, for forwarding SIGINT/SIGTERM (async-signal-safe reads).
constexpr int kMaxChildren = 1024;
volatile sig_atomic_t g_num_children = 0;
pid_t g_children[kMaxChildren];
volatile sig_atomic_t g_interrupted = 0;  // SIGINT or SIGTERM reached the launcher

void ForwardSignal(int sig) {
  g_interrupted = 1;
  for (int i = 0; i < g_num_children; ++i) {
    if (g_children[i] > 0) kill(g_children[i], sig);
  }
}

int StatusToCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// A folder only this user can enter (mkdtemp: mode 0700), removed with its contents when
// this object goes.
struct PrivateDir {
  std::filesystem::path path;
  PrivateDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "dapple-rendezvous-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr)
      throw Error(fmt::format("launcher: cannot create a private folder {}: {}", tmpl,
                              std::strerror(errno)));
    path = tmpl;
  }
  ~PrivateDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
};

// The environment of one child: the inherited one with `set` replacing or adding entries.
std::vector<std::string> ChildEnv(const std::map<std::string, std::string>& set) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos && set.count(kv.substr(0, eq))) continue;
    env.push_back(std::move(kv));
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  return env;
}

// `cores`: the child's cores (Note [Devices as cores]); null to inherit the launcher's.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const CoreSet* cores) {
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw Error(fmt::format("launcher: fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    // A failed pin leaves the child on the launcher's cores: it still runs, only unpinned.
    // (PinCallingThread only reads the set and makes one system call: safe after fork.)
    if (cores) (void)PinCallingThread(*cores);
    execve(a[0], a.data(), e.data());
    // Only async-signal-safe calls between fork and exec/_exit.
    const char msg[] = "dapple launcher: exec failed\n";
    ssize_t ignored = write(2, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(127);
  }
  return pid;
}

}  // namespace

std::string SelfExecutablePath() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("launcher: cannot read /proc/self/exe: " + ec.message());
  return p.string();
}

bool LaunchWasInterrupted() { return g_interrupted != 0; }

bool LaunchedByLauncher() { return std::getenv("DAPPLE_LAUNCHED") != nullptr; }

int PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(fmt::format("launcher: socket: {}", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    close(fd);
    throw Error(fmt::format("launcher: cannot find a free port: {}", std::strerror(err)));
  }
  close(fd);
  return ntohs(addr.sin_port);
}

int LaunchLocal(const LaunchOptions& o) { return LaunchLocal(o, nullptr); }

namespace {

// The environment every child shares: the world, the rendezvous, thread counts.
std::map<std::string, std::string> CommonChildEnv(const LaunchOptions& o, int default_threads,
                                                  std::optional<PrivateDir>& rendezvous) {
  const std::string threads = std::to_string(default_threads);
  std::map<std::string, std::string> common = o.extra_env;
  common["WORLD_SIZE"] = std::to_string(o.nproc_per_node * o.nnodes);
  common["MASTER_ADDR"] = o.master_addr;
  common["MASTER_PORT"] = std::to_string(o.master_port);
  common["DAPPLE_LAUNCHED"] = "1";
  // Note [Rendezvous exposure] (communicator.h): a job of one machine meets in a FileStore
  // in a private folder, not on a network port.
  if (o.nnodes == 1) {
    rendezvous.emplace();
    common["DAPPLE_RENDEZVOUS_FILE"] = (rendezvous->path / "store").string();
  }
  // libtorch's BLAS (MKL in the wheel) and its intra-op pool (OpenMP) start with these;
  // each rank sets its own count again once libtorch is loaded (SetComputeThreads).
  if (!std::getenv("OMP_NUM_THREADS")) common["OMP_NUM_THREADS"] = threads;
  if (!std::getenv("MKL_NUM_THREADS")) common["MKL_NUM_THREADS"] = threads;
  return common;
}

// SIGINT and SIGTERM go to the children while the launcher waits for them.
class ForwardedSignals {
 public:
  ForwardedSignals() {
    struct sigaction fwd {};
    fwd.sa_handler = ForwardSignal;
    sigemptyset(&fwd.sa_mask);
    sigaction(SIGINT, &fwd, &old_int_);
    sigaction(SIGTERM, &fwd, &old_term_);
  }
  ~ForwardedSignals() {
    g_num_children = 0;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  ForwardedSignals(const ForwardedSignals&) = delete;
  ForwardedSignals& operator=(const ForwardedSignals&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// Starts the node's children; on a failure kills those started and throws.
std::vector<pid_t> SpawnChildren(const LaunchOptions& o,
                                 const std::map<std::string, std::string>& common,
                                 const std::vector<CoreSet>& pins) {
  std::vector<pid_t> pids;
  try {
    for (int i = 0; i < o.nproc_per_node; ++i) {
      auto env = common;
      env["RANK"] = std::to_string(o.node_rank * o.nproc_per_node + i);
      env["LOCAL_RANK"] = std::to_string(i);
      pids.push_back(Spawn(o.argv, ChildEnv(env), pins.empty() ? nullptr : &pins[i]));
      g_children[i] = pids.back();
      g_num_children = i + 1;
    }
  } catch (...) {
    for (pid_t p : pids) kill(p, SIGKILL);
    for (pid_t p : pids) waitpid(p, nullptr, 0);
    throw;
  }
  return pids;
}

// Waits for all children; the first failure stops the others (SIGTERM after o.term_delay,
// SIGKILL after the grace). Returns the first failure's exit code (0: none).
int WaitForChildren(const LaunchOptions& o, const std::vector<pid_t>& pids, int* failed_rank,
                    double* stop_seconds) {
  using Clock = std::chrono::steady_clock;
  int first_failure = 0;
  size_t running = pids.size();
  std::vector<bool> done(pids.size(), false);
  auto deadline = Clock::time_point::max(), term_at = Clock::time_point::max();
  bool killed = false, termed = false;
  Clock::time_point failed_at;
  auto signal_running = [&](int sig) {
    for (size_t i = 0; i < pids.size(); ++i)
      if (!done[i]) kill(pids[i], sig);
  };
  while (running > 0) {
    int status = 0;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p < 0 && errno != EINTR) break;
    if (p <= 0) {
      if (first_failure != 0 && !termed && Clock::now() > term_at) {
        signal_running(SIGTERM);
        termed = true;
        deadline = Clock::now() + o.kill_grace;
      }
      if (termed && !killed && Clock::now() > deadline) {
        signal_running(SIGKILL);
        killed = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] != p || done[i]) continue;
      done[i] = true;
      g_children[i] = 0;
      --running;
      int code = StatusToCode(status);
      if (code != 0 && first_failure == 0) {
        first_failure = code;
        if (failed_rank) *failed_rank = o.node_rank * o.nproc_per_node + static_cast<int>(i);
        failed_at = Clock::now();
        term_at = failed_at + o.term_delay;
      }
    }
  }
  if (stop_seconds && first_failure != 0)
    *stop_seconds = std::chrono::duration<double>(Clock::now() - failed_at).count();
  return first_failure;
}

}  // namespace

int LaunchLocal(const LaunchOptions& o, int* failed_rank, double* stop_seconds) {
  if (failed_rank) *failed_rank = -1;
  if (stop_seconds) *stop_seconds = 0;
  DAPPLE_CHECK(o.nproc_per_node >= 1 && o.nnodes >= 1 && o.node_rank >= 0 &&
               o.node_rank < o.nnodes && !o.argv.empty());
  DAPPLE_CHECK(o.nproc_per_node <= kMaxChildren);
  // The profiler's default threads are these (common/machine.h), so profiles time layers as
  // the training processes run them.
  const int default_threads = ThreadsPerProcess(ThisMachine().cores, o.nproc_per_node);
  std::optional<PrivateDir> rendezvous;
  const std::map<std::string, std::string> common = CommonChildEnv(o, default_threads, rendezvous);
  // Note [Devices as cores]: local rank i runs on the i-th set of the allowed cores, as
  // many as its compute threads, when they all fit without sharing.
  std::vector<CoreSet> pins;
  if (o.pin_cores) {
    int t = default_threads;
    if (const char* omp = std::getenv("OMP_NUM_THREADS")) t = std::max(1, std::atoi(omp));
    if (auto sets = DeviceCoreSets(o.nproc_per_node, t)) pins = std::move(*sets);
  }
  ForwardedSignals forwarded;
  const std::vector<pid_t> pids = SpawnChildren(o, common, pins);
  return WaitForChildren(o, pids, failed_rank, stop_seconds);
}

}  // namespace dapple
