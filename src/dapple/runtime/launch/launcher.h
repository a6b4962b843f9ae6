// The built-in local launcher (docs/design.md section 7): starts the processes of one node of a
// job with the variables DistEnv reads, as torchrun does, and relays their failure.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace dapple {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;  // this node's index: its processes get RANK node_rank*nproc + i
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Program and arguments of every process; argv[0] is the executable's path.
  std::vector<std::string> argv;
  // Set in every child on top of the inherited environment (and the launcher's variables).
  std::map<std::string, std::string> extra_env;
  // After one process fails, the others get SIGTERM, then SIGKILL after this grace.
  std::chrono::milliseconds kill_grace{3000};
  // After the first failure, the others get this long to exit on their own (and report
  // what they were waiting on) before the SIGTERM.
  std::chrono::milliseconds term_delay{0};
  // Note [Devices as cores] (common/core_sets.h): pin local rank i to the i-th set of the
  // allowed cores when every process's threads fit (and DAPPLE_PIN_CORES is not 0).
  bool pin_cores = true;
};

// Starts nproc_per_node processes of `argv` with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, DAPPLE_LAUNCHED=1, for a job of one node DAPPLE_RENDEZVOUS_FILE (a FileStore
// in a private folder removed when they are done; Note [Rendezvous exposure]);
// OMP_NUM_THREADS / MKL_NUM_THREADS (when unset: the cores divided among the processes, at
// least 1). Waits for all of them. When one fails, stops the
// others. Returns 0 when every process succeeded, else the exit status of the first that failed
// (128 + signal number for a process killed by a signal). Throws Error when it cannot start
// a process. REQUIRES: nproc_per_node >= 1, 0 <= node_rank < nnodes, !argv.empty().
int LaunchLocal(const LaunchOptions& options);
// As above; also sets *failed_rank to the RANK of the first process that failed (-1 when
// none did) and, when given, *stop_seconds to the time from that failure until every
// process had exited (0 when none failed).
int LaunchLocal(const LaunchOptions& options, int* failed_rank, double* stop_seconds = nullptr);

// True once SIGINT or SIGTERM reached a running LaunchLocal (and was forwarded to its
// processes): the user stopped the job, so nothing should restart it.
bool LaunchWasInterrupted();

// True in a process started by LaunchLocal (DAPPLE_LAUNCHED is set).
bool LaunchedByLauncher();

// A TCP port that was free on the loopback a moment ago (for single-node jobs).
int PickFreePort();

// Path of the running executable (/proc/self/exe), for re-launching oneself.
std::string SelfExecutablePath();

}  // namespace dapple
