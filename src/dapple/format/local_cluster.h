// The `local` cluster measured once: `dapple calibrate` caches its calibration of this
// machine, with the machine's identity, under DappleCacheDir(); `--cluster local` uses it
// while the identity still matches and falls back to the guess (ClusterPreset("local"))
// otherwise, saying why. Torch-free, for `plan` and `simulate`.
#pragma once

#include <filesystem>
#include <string>

#include "dapple/format/cluster.h"

namespace dapple {

// DappleCacheDir() / "local-cluster.json": a dapple-cluster/1 file whose `local.machine`
// is the identity of the machine it was calibrated on.
std::filesystem::path LocalCalibrationPath();

struct LocalCluster {
  Cluster cluster;          // named "local" either way
  bool calibrated = false;  // from the cache; false: the guess
  // One line for people: where the calibration came from, or why the guess is used (no
  // cache, another machine's, unreadable) and how to measure it.
  std::string note;
};

// The calibration in `path` when it reads, has `local` devices and their machine is `now`;
// else the guess, with the reason in `note`. Never throws for a bad cache: a stale or
// corrupt file is the same as none.
LocalCluster LoadLocalCluster(const std::filesystem::path& path, const MachineIdentity& now);
// LoadLocalCluster(LocalCalibrationPath(), ThisMachine()).
LocalCluster LoadLocalCluster();

// Writes `calibrated` as the cache at `path` (atomically, creating the folder), named
// "local". REQUIRES: calibrated.local (the machine it was measured on). Throws InputError
// when it cannot write.
void WriteLocalCalibration(const Cluster& calibrated, const std::filesystem::path& path);

}  // namespace dapple
