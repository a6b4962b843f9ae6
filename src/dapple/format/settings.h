// How compute was measured and how it will run: the `settings` of a profile and the `local`
// devices of a one-machine cluster in JSON, and the one-line warning when a profile was
// measured unlike the cluster's devices compute (so its times would not predict them).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "dapple/common/json_util.h"
#include "dapple/common/machine.h"
#include "dapple/format/cluster.h"
#include "dapple/format/profile.h"

namespace dapple {

nlohmann::ordered_json MachineToJson(const MachineIdentity& m);
// Throws InputError naming the field.
MachineIdentity ReadMachine(const JsonField& f);

nlohmann::ordered_json ProfileSettingsToJson(const ProfileSettings& s);
ProfileSettings ReadProfileSettings(const JsonField& f);

nlohmann::ordered_json LocalDevicesToJson(const LocalDevices& d);
LocalDevices ReadLocalDevices(const JsonField& f);

// When `profile` records its settings and `cluster` its local devices: one line naming how
// they differ (another machine, threads per process, cold or warm caches) and the flags
// that would match them, else nullopt. Clusters of other hardware (no `local`) and old
// profiles (no `settings`) have nothing to compare.
std::optional<std::string> SettingsMismatch(const Profile& profile, const Cluster& cluster);

}  // namespace dapple
