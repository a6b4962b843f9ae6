// Settings JSON and the profile-against-cluster comparison (settings.h).
#include "dapple/format/settings.h"

#include <fmt/format.h>

#include <vector>

namespace dapple {

nlohmann::ordered_json MachineToJson(const MachineIdentity& m) {
  return {{"cpu", m.cpu},
          {"cores", m.cores},
          {"memory_bytes", m.memory_bytes},
          {"hostname", m.hostname},
          {"machine_id", m.machine_id}};
}

MachineIdentity ReadMachine(const JsonField& f) {
  f.ExpectObject();
  MachineIdentity m;
  m.cpu = f["cpu"].String();
  m.cores = f["cores"].PositiveInt();
  m.memory_bytes = f["memory_bytes"].NonNegative();
  m.hostname = f["hostname"].String();
  m.machine_id = f.Has("machine_id") ? f["machine_id"].String() : "";
  return m;
}

nlohmann::ordered_json ProfileSettingsToJson(const ProfileSettings& s) {
  return {{"threads", s.threads},
          {"batch_sizes", s.batch_sizes},
          {"optimizer", s.optimizer},
          {"caches", s.cold_caches ? "cold" : "warm"},
          {"machine", MachineToJson(s.machine)}};
}

namespace {

bool ReadCaches(const JsonField& f) {
  std::string c = f.String();
  if (c != "cold" && c != "warm") f.Fail(fmt::format("expected \"cold\" or \"warm\", got '{}'", c));
  return c == "cold";
}

}  // namespace

ProfileSettings ReadProfileSettings(const JsonField& f) {
  f.ExpectObject();
  ProfileSettings s;
  s.threads = f["threads"].PositiveInt();
  JsonField bs = f["batch_sizes"];
  for (size_t k = 0; k < bs.size(); ++k) s.batch_sizes.push_back(bs[k].PositiveInt());
  s.optimizer = f["optimizer"].String();
  s.cold_caches = ReadCaches(f["caches"]);
  s.machine = ReadMachine(f["machine"]);
  return s;
}

nlohmann::ordered_json LocalDevicesToJson(const LocalDevices& d) {
  nlohmann::ordered_json o = {{"machine", MachineToJson(d.machine)},
                              {"threads_per_device", d.threads_per_device}};
  if (d.cold_caches) o["caches"] = *d.cold_caches ? "cold" : "warm";
  o["calibration_version"] = d.calibration_version;
  if (d.busy_cores) o["busy_cores"] = *d.busy_cores;
  return o;
}

LocalDevices ReadLocalDevices(const JsonField& f) {
  f.ExpectObject();
  LocalDevices d;
  d.machine = ReadMachine(f["machine"]);
  d.threads_per_device = f["threads_per_device"].PositiveInt();
  if (f.Has("caches")) d.cold_caches = ReadCaches(f["caches"]);
  d.calibration_version =
      f.Has("calibration_version") ? f["calibration_version"].NonNegativeInt() : 0;
  if (f.Has("busy_cores")) d.busy_cores = f["busy_cores"].NonNegative();
  return d;
}

std::optional<std::string> SettingsMismatch(const Profile& profile, const Cluster& cluster) {
  if (!profile.settings || !cluster.local) return std::nullopt;
  const ProfileSettings& p = *profile.settings;
  const LocalDevices& d = *cluster.local;
  std::vector<std::string> diffs, flags;
  // Only what changes compute speed: the CPU and its cores, not the host name.
  if (p.machine.cpu != d.machine.cpu || p.machine.cores != d.machine.cores) {
    diffs.push_back(fmt::format("it was measured on {} x {} cores, the devices are {} x {} cores",
                                p.machine.cpu, p.machine.cores, d.machine.cpu, d.machine.cores));
    flags.push_back("profile on this machine");
  }
  if (p.threads != d.threads_per_device) {
    diffs.push_back(fmt::format("{} thread{} against {} per device", p.threads,
                                p.threads == 1 ? "" : "s", d.threads_per_device));
    flags.push_back(fmt::format("--threads {}", d.threads_per_device));
  }
  if (d.cold_caches && *d.cold_caches != p.cold_caches) {
    diffs.push_back(fmt::format("{} caches against a calibration with {} caches",
                                p.cold_caches ? "cold" : "warm", *d.cold_caches ? "cold" : "warm"));
    flags.push_back(*d.cold_caches ? "--cold-caches" : "no --cold-caches");
  }
  if (diffs.empty()) return std::nullopt;
  std::string what, fix;
  for (size_t i = 0; i < diffs.size(); ++i) what += (i ? "; " : "") + diffs[i];
  for (size_t i = 0; i < flags.size(); ++i) fix += (i ? ", " : "") + flags[i];
  return fmt::format(
      "the profile ({}) was not measured as the devices of cluster '{}' compute: {} (re-profile "
      "with {})",
      profile.model, cluster.name, what, fix);
}

}  // namespace dapple
