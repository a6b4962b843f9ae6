// The `local` cluster measured once: `dapple calibrate` caches its calibration of this
// machine, with the machine's identity, under DappleCacheDir(); `--cluster local` uses it
// while the identity still matches and falls back to the guess (ClusterPreset("local"))
// otherwise, saying why. Torch-free, for `plan` and `simulate`.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "dapple/format/cluster.h"

namespace dapple {

// DappleCacheDir() / "local-cluster.json": a dapple-cluster/1 file whose `local.machine`
// is the identity of the machine it was calibrated on.
std::filesystem::path LocalCalibrationPath();

struct LocalCluster {
  Cluster cluster;          // named "local" either way
  bool calibrated = false;  // from the cache; false: the guess
  // The calibration was taken while other work loaded the machine (MachineIsBusy); it is
  // still used, and `note` says so.
  bool busy = false;
  // One line for people: where the calibration came from, or why the guess is used (no
  // cache, another machine's, an older dapple's, unreadable) and how to measure it.
  std::string note;
};

// Whether `busy_cores` of `cores` cores busy (BusyCores) means other work competes for the
// cores a calibration times: at least half of them.
bool MachineIsBusy(double busy_cores, int cores);

// The calibration in `path` when it reads, has `local` devices, their machine is `now` and
// this dapple's calibration version (Note [Calibration version] in cluster.h) wrote it;
// else the guess, with the reason in `note`. Never throws for a bad cache: a stale or
// corrupt file is the same as none.
LocalCluster LoadLocalCluster(const std::filesystem::path& path, const MachineIdentity& now);
// LoadLocalCluster(LocalCalibrationPath(), ThisMachine()).
LocalCluster LoadLocalCluster();

// Why plain `dapple calibrate` for `nproc` devices should measure again rather than keep
// `cached`: it is the guess (its note), it has another device count, or it was taken on a
// busy machine and the machine is idle now (`busy_now` cores busy of this machine's `cores`).
// nullopt: keep it (a busy calibration stays while the machine is still busy: measuring
// again would not be better).
std::optional<std::string> ReasonToCalibrateAgain(const LocalCluster& cached, int nproc,
                                                  std::optional<double> busy_now, int cores);

// Writes `calibrated` as the cache at `path` (atomically, creating the folder), named
// "local". REQUIRES: calibrated.local (the machine it was measured on). Throws InputError
// when it cannot write.
void WriteLocalCalibration(const Cluster& calibrated, const std::filesystem::path& path);

}  // namespace dapple
