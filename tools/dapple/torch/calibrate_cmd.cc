// `dapple calibrate`: measures the links and the allreduce of the machines it runs on through
// the runtime's communicator and writes a dapple-cluster/1 file (docs/design.md 4 and 8).
//
// Two ways to run it: with --nproc N it is a launcher that starts N local processes of itself
// (one node; with --nnodes/--node-rank/--master-addr, one node of several, as torchrun);
// without --nproc it is one process of a job whose launcher set RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR and MASTER_PORT. Rank 0 writes the file and prints a summary.
//
// A calibration of one machine as one server is also this machine's `local` cluster: rank 0
// caches it with the machine's identity (format/local_cluster.h). Plain `dapple calibrate`
// (no -o, no launcher variables) calibrates this machine with one process per core, once:
// while the cache is current it only says so (--force measures again).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.h"
#include "dapple/calibrate/calibration.h"
#include "dapple/common/error.h"
#include "dapple/common/json_util.h"
#include "dapple/common/machine.h"
#include "dapple/common/malloc_tuning.h"
#include "dapple/format/cluster.h"
#include "dapple/format/local_cluster.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/device.h"
#include "dapple/runtime/launch/launcher.h"
#include "launch_cli.h"

namespace dapple {
namespace {

// The launcher's sample of the cores other work keeps busy, handed to the ranks (Note
// [Calibration version] in format/cluster.h records it as `busy_cores`).
constexpr const char* kBusyCoresEnv = "DAPPLE_CALIBRATE_BUSY_CORES";
constexpr std::chrono::milliseconds kBusyWindow{250};

struct CalibrateArgs {
  std::string output;
  LaunchCli launch;  // launch.nproc == 0: this process is one rank of a job
  std::string name = "calibrated";
  std::string host;
  double speed = 0;  // 0: measured
  double memory_bytes = 0;
  int repeats = 10;
  double budget_s = 20;
  double timeout_s = 60;
  uint64_t min_bytes = 4;
  uint64_t max_bytes = 16 << 20;
  uint64_t min_fit_bytes = 1 << 20;
  bool cold_caches = false;
  bool force = false;          // measure even when the cached local calibration is current
  std::string device = "cpu";  // Note [Calibrating GPUs]
};

std::chrono::milliseconds Millis(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

// The options a child process gets: everything but the launcher's own.
std::vector<std::string> ChildArgv(const CalibrateArgs& a) {
  std::vector<std::string> v = {SelfExecutablePath(),
                                "calibrate",
                                "--name",
                                a.name,
                                "--speed",
                                fmt::format("{}", a.speed),
                                "--memory-bytes",
                                fmt::format("{}", a.memory_bytes),
                                "--repeats",
                                std::to_string(a.repeats),
                                "--budget",
                                fmt::format("{}", a.budget_s),
                                "--timeout",
                                fmt::format("{}", a.timeout_s),
                                "--min-bytes",
                                std::to_string(a.min_bytes),
                                "--max-bytes",
                                std::to_string(a.max_bytes),
                                "--min-fit-bytes",
                                std::to_string(a.min_fit_bytes)};
  if (!a.host.empty()) {
    v.push_back("--host");
    v.push_back(a.host);
  }
  if (a.cold_caches) v.push_back("--cold-caches");
  if (!a.output.empty()) {
    v.push_back("-o");
    v.push_back(a.output);
  }
  return v;
}

int LaunchCalibration(const CalibrateArgs& a, std::optional<double> busy_cores) {
  LaunchOptions o = MakeLaunchOptions("calibrate", a.launch, ChildArgv(a));
  if (busy_cores) o.extra_env[kBusyCoresEnv] = fmt::format("{}", *busy_cores);
  return LaunchLocal(o);
}

// Note [Calibrating GPUs] (docs/gpu.md): with --device cuda each rank's messages and
// allreduces are tensors on its GPU, carried as training carries them (NCCL, or staged
// through the host where ranks share a GPU), so the links measured are the GPUs'; a device's
// memory is the GPU's, and its speed 1 unless --speed says otherwise (the profile's times
// are the GPU's own; the matmul loop measures CPU cores). Has not run on a GPU yet.
torch::Device CalibrationDevice(const CalibrateArgs& a, int local_rank, CalibrationOptions& o) {
  const torch::Device device = DeviceForLocalRank(ParseDeviceChoice(a.device), local_rank);
  UseDevice(device);
  if (device.is_cuda()) {
    if (o.memory_bytes <= 0) o.memory_bytes = static_cast<double>(DeviceTotalMemory(device));
    if (!(o.speed > 0)) o.speed = 1;
  }
  return device;
}

void RunRank(const CalibrateArgs& a) {
  KeepFreedMemoryForReuse();  // Note [Freed memory stays]
  DistEnv env = DistEnv::FromEnvironment();
  // The cores other work kept busy before this job started: the launcher's figure, taken
  // before any rank existed; under an outer launcher rank 0 looks itself (the other ranks'
  // start-up then counts too).
  std::optional<double> busy_at_start;
  if (const char* b = std::getenv(kBusyCoresEnv); b && *b) {
    busy_at_start = std::atof(b);
  } else if (env.rank == 0) {
    busy_at_start = BusyCores(kBusyWindow);
  }
  const int cores = ThisMachine().cores;
  if (env.rank == 0 && busy_at_start && MachineIsBusy(*busy_at_start, cores))
    std::fprintf(stderr,
                 "dapple calibrate: other work keeps %.1f of %d cores busy: the timings include "
                 "it; a cached calibration says so and plain `dapple calibrate` measures again "
                 "once the machine is idle\n",
                 *busy_at_start, cores);
  if (env.world_size < 2)
    ThrowInput(
        "calibrate: needs at least two processes (WORLD_SIZE={}): pass --nproc 2 on one "
        "machine, or start it under a launcher that sets RANK and WORLD_SIZE",
        env.world_size);
  CalibrationOptions o;
  o.p2p_sizes = SizeSweep(static_cast<int64_t>(a.min_bytes), static_cast<int64_t>(a.max_bytes));
  o.allreduce_sizes = o.p2p_sizes;
  o.repeats = a.repeats;
  o.budget = Millis(a.budget_s);
  o.min_fit_bytes = static_cast<int64_t>(a.min_fit_bytes);
  o.name = a.name;
  o.speed = a.speed;
  o.memory_bytes = a.memory_bytes;
  o.cold_caches = a.cold_caches;
  std::string host = a.host.empty() ? CalibrationHostName() : a.host;

  const torch::Device device = CalibrationDevice(a, env.local_rank, o);
  std::optional<CalibrationResult> r;
  try {
    Communicator comm(env, Millis(a.timeout_s), device);
    r = Calibrate(comm, host, o);
  } catch (const PeerFailedError&) {
    CommandExitCode() = 2;  // the rank that failed prints why: one line for the job
    return;
  } catch (const CommError& e) {
    ThrowInput("calibrate: rank {}: {}", env.rank, e.what());
  }
  if (!r) return;
  // The `local` cluster is this machine's CPU cores: a GPU calibration goes to -o only.
  const bool local = !device.is_cuda() && r->one_machine && r->cluster.num_servers() == 1;
  if (local) {
    // Each process of `dapple train --nproc N` on this machine computes with these threads.
    MachineIdentity m = ThisMachine();
    r->cluster.local = LocalDevices{m, ThreadsPerProcess(m.cores, r->cluster.num_devices()),
                                    a.cold_caches, kCalibrationVersion, busy_at_start};
  }
  std::fputs(CalibrationSummary(*r).c_str(), stdout);
  if (!a.output.empty()) {
    WriteFileAtomic(a.output, CalibrationToJsonText(*r));
    ReadClusterJson(a.output);  // what was written must read back and validate
    std::printf("wrote %s\n", a.output.c_str());
  }
  if (local) {
    WriteLocalCalibration(r->cluster, LocalCalibrationPath());
    std::printf("cached as this machine's `local` cluster: %s\n", LocalCalibrationPath().c_str());
  } else if (a.output.empty()) {
    ThrowInput(
        "calibrate: the ranks are not one machine as one server, so this is no `local` "
        "calibration: pass -o to keep it");
  }
}

// True (after saying so) when plain `dapple calibrate` finds this machine's calibration
// current for `nproc` devices, `busy_now` cores busy with other work.
bool CachedCalibrationIsCurrent(int nproc, std::optional<double> busy_now) {
  LocalCluster cached = LoadLocalCluster();
  if (auto why = ReasonToCalibrateAgain(cached, nproc, busy_now, ThisMachine().cores)) {
    if (cached.calibrated) std::printf("measuring this machine again: %s\n", why->c_str());
    return false;
  }
  std::printf(
      "this machine's calibration is current (%d devices, %s%s); --force measures it again\n",
      nproc, LocalCalibrationPath().c_str(), cached.busy ? ", taken while it was busy" : "");
  return true;
}

// The sizes, repeats and time limits of the measurements.
void AddSweepOptions(CLI::App* cmd, CalibrateArgs* a) {
  cmd->add_option("--repeats", a->repeats, "timed round trips per size")
      ->check(CLI::Range(3, 1000))
      ->capture_default_str();
  cmd->add_option("--budget", a->budget_s,
                  "seconds one link's sweep may take; larger sizes are skipped beyond it")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  cmd->add_option("--timeout", a->timeout_s, "seconds any wait may take (at least twice --budget)")
      ->check(CLI::Range(0.5, 7200.0))
      ->capture_default_str();
  cmd->add_option("--min-bytes", a->min_bytes, "smallest message (sizes grow x4)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  cmd->add_option("--max-bytes", a->max_bytes, "largest message")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  cmd->add_option("--min-fit-bytes", a->min_fit_bytes,
                  "messages up to this size must finish within the budget, else the link is "
                  "too slow to measure")
      ->transform(CLI::AsSizeValue(false));
}

// `dapple calibrate`: checks the flags, then launches the ranks or runs as one of them.
void RunCalibrateCommand(CalibrateArgs& a) {
  std::optional<double> busy;  // cores busy with other work, sampled before any rank starts
  if (a.min_bytes > a.max_bytes)
    ThrowInput("calibrate: --min-bytes {} exceeds --max-bytes {}", a.min_bytes, a.max_bytes);
  if (a.timeout_s < 2 * a.budget_s)
    ThrowInput("calibrate: --timeout ({} s) must be at least twice --budget ({} s)", a.timeout_s,
               a.budget_s);
  // A bad --device, or cuda without a GPU: one line before any process starts.
  DeviceForLocalRank(ParseDeviceChoice(a.device), 0);
  if (a.device != "cpu" && a.output.empty())
    ThrowInput("calibrate --device {}: pass -o (the `local` cluster is this machine's cores)",
               a.device);
  if (!LaunchedByLauncher() && a.launch.nproc == 0 && std::getenv("RANK") == nullptr &&
      std::getenv("WORLD_SIZE") == nullptr) {
    // Plain `dapple calibrate`: this machine, one process per core, as the `local` guess.
    a.launch.nproc = std::max(2, ThisMachine().cores);
    busy = BusyCores(kBusyWindow);
    if (a.output.empty() && !a.force && CachedCalibrationIsCurrent(a.launch.nproc, busy)) return;
  }
  if (a.launch.nproc > 0 && !LaunchedByLauncher()) {
    if (a.output.empty() && a.launch.nnodes > 1)
      ThrowInput("calibrate: a job of {} nodes needs -o (only one machine is `local`)",
                 a.launch.nnodes);
    if (!busy) busy = BusyCores(kBusyWindow);
    CommandExitCode() = LaunchCalibration(a, busy);
    return;
  }
  RunRank(a);
}

}  // namespace

void AddCalibrateCommand(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Measure latency and bandwidth inside and between servers and allreduce time through "
      "c10d, and write a dapple-cluster/1 file");
  cmd->add_option("-o,--output", args->output,
                  "cluster JSON to write (rank 0); a calibration of this machine alone is also "
                  "cached as the `local` cluster");
  AddLaunchOptions(cmd, &args->launch,
                   "start this many local processes (a launcher); without it, run as one rank "
                   "of a job whose launcher set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT");
  cmd->add_option("--name", args->name, "name of the cluster")->capture_default_str();
  cmd->add_option("--host", args->host,
                  "host name this rank reports (default: $DAPPLE_HOST, else the host name); "
                  "ranks with the same host form one server");
  cmd->add_option("--speed", args->speed,
                  "device speed relative to the profile's device (default: measured, a matmul "
                  "loop on rank 0 alone against every rank at once)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--force", args->force,
                "measure even when this machine's cached calibration is current");
  cmd->add_flag("--cold-caches", args->cold_caches,
                "time the resume cost's chunk alone after a 64 MiB write, for profiles taken "
                "with `dapple profile --cold-caches`");
  cmd->add_option("--memory-bytes", args->memory_bytes,
                  "memory per device (default: physical memory / devices of the server)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", args->device,
                  "cpu | cuda: measure the GPUs (each rank on the GPU of its local rank; their "
                  "links carry GPU tensors; memory per device the GPU's; speed 1 unless "
                  "--speed); needs -o")
      ->capture_default_str();
  AddSweepOptions(cmd, args.get());
  cmd->callback([args] { RunCalibrateCommand(*args); });
}

}  // namespace dapple
