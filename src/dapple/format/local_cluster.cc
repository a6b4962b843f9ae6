// The cached calibration of this machine (local_cluster.h).
#include "dapple/format/local_cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <system_error>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"

namespace dapple {

std::filesystem::path LocalCalibrationPath() { return DappleCacheDir() / "local-cluster.json"; }

LocalCluster LoadLocalCluster(const std::filesystem::path& path, const MachineIdentity& now) {
  LocalCluster out{ClusterPreset("local"), false, false, ""};
  const std::string how = "run `dapple calibrate` to measure this machine";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    out.note = fmt::format(
        "cluster 'local' is the guess (one device per core, constant links): no calibration of "
        "this machine in {}; {}",
        path.string(), how);
    return out;
  }
  Cluster c;
  try {
    c = ReadClusterJson(path);
  } catch (const InputError& e) {
    out.note =
        fmt::format("cluster 'local' is the guess: the cached calibration is unreadable ({}); {}",
                    e.what(), how);
    return out;
  }
  if (!c.local) {
    out.note =
        fmt::format("cluster 'local' is the guess: {} does not name the machine it measured; {}",
                    path.string(), how);
    return out;
  }
  if (auto diff = c.local->machine.DifferenceTo(now)) {
    out.note = fmt::format(
        "cluster 'local' is the guess: the calibration in {} is of another machine ({}); {}",
        path.string(), *diff, how);
    return out;
  }
  if (c.local->calibration_version < kCalibrationVersion) {
    out.note = fmt::format(
        "cluster 'local' is the guess: the calibration in {} was made by an older dapple "
        "(calibration version {}, this one writes {}) and lacks what it measures now; {}",
        path.string(), c.local->calibration_version, kCalibrationVersion, how);
    return out;
  }
  c.name = "local";
  const std::optional<double> busy = c.local->busy_cores;
  out.busy = busy && MachineIsBusy(*busy, c.local->machine.cores);
  out.cluster = std::move(c);
  out.calibrated = true;
  out.note = fmt::format("cluster 'local': this machine's calibration ({} devices, {})",
                         out.cluster.num_devices(), path.string());
  if (out.busy)
    out.note += fmt::format(
        ", taken while other work kept {:.1f} of {} cores busy, so its compute and wake-up "
        "figures are slow; `dapple calibrate` measures again once the machine is idle",
        *busy, out.cluster.local->machine.cores);
  return out;
}

bool MachineIsBusy(double busy_cores, int cores) { return busy_cores >= 0.5 * std::max(1, cores); }

std::optional<std::string> ReasonToCalibrateAgain(const LocalCluster& cached, int nproc,
                                                  std::optional<double> busy_now, int cores) {
  if (!cached.calibrated) return cached.note;
  if (cached.cluster.num_devices() != nproc)
    return fmt::format("the cached calibration has {} devices, not {}",
                       cached.cluster.num_devices(), nproc);
  if (cached.busy && busy_now && !MachineIsBusy(*busy_now, cores))
    return fmt::format(
        "the cached calibration was taken while the machine was busy ({:.1f} cores); it is "
        "idle now ({:.1f} cores busy)",
        cached.cluster.local->busy_cores.value_or(0), *busy_now);
  return std::nullopt;
}

LocalCluster LoadLocalCluster() { return LoadLocalCluster(LocalCalibrationPath(), ThisMachine()); }

void WriteLocalCalibration(const Cluster& calibrated, const std::filesystem::path& path) {
  DAPPLE_CHECK(calibrated.local.has_value(), "WriteLocalCalibration: no machine identity");
  Cluster c = calibrated;
  c.name = "local";
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec)
    ThrowInput("{}: cannot create the cache folder: {}", path.parent_path().string(), ec.message());
  WriteFileAtomic(path, ClusterToJsonText(c));
}

}  // namespace dapple
