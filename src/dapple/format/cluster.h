// A cluster (docs/design.md section 8): servers with devices, device memory and speed, and the
// intra- and inter-server links. Reader/writer for `dapple-cluster/1` and built-in presets.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dapple/common/machine.h"

namespace dapple {

struct DeviceSpec {
  DeviceSpec() = default;
  DeviceSpec(double memory, double relative_speed) : memory_bytes(memory), speed(relative_speed) {}

  double memory_bytes = 16e9;
  double speed = 1.0;  // relative to the device the profile was taken on
  // Note [Process memory]: what a training process holds on the device beside its stage
  // (the framework's code and pools, communication buffers; a CUDA context on a GPU). JSON
  // `process_memory_bytes`, optional, 0 when absent; `dapple calibrate` measures it.
  double process_memory_bytes = 0;
};

struct LinkSpec {
  LinkSpec() = default;
  // The point-to-point figures; the allreduce ones stay unset (so `LinkSpec{bw, lat}` needs
  // no placeholders for them).
  LinkSpec(double bandwidth, double latency)
      : bandwidth_bytes_per_s(bandwidth), latency_s(latency) {}

  double bandwidth_bytes_per_s = 25e9;
  double latency_s = 0;
  // What a ring allreduce achieves over this kind of link, when measured (`dapple
  // calibrate`): the bus bandwidth 2(r-1)/r x bytes / time, and the time of one ring step.
  // On CPUs gloo's reductions and copies make it far lower than the point-to-point
  // bandwidth. Unset: the point-to-point values above.
  std::optional<double> allreduce_bandwidth_bytes_per_s;
  std::optional<double> allreduce_latency_s;
  double AllReduceBandwidth() const {
    return allreduce_bandwidth_bytes_per_s.value_or(bandwidth_bytes_per_s);
  }
  double AllReduceLatency() const { return allreduce_latency_s.value_or(latency_s); }
};

struct ServerSpec {
  int devices = 1;
  std::optional<DeviceSpec> device;  // overrides Cluster::device for mixed hardware
};

// Note [Calibration version]: what `dapple calibrate` measures grows (version 1 added the
// process's own memory; version 2 the wake-up cost of 2 ranks, Note [Wake-up cost] in
// calibrate/calibration_steps.cc; version 3 counts in the process's memory the freed memory
// a training rank lets malloc keep, Note [Freed memory between steps] in
// common/malloc_tuning.h; version 4 measures that memory without the CUDA libraries, which
// a CPU process no longer loads, Note [CUDA on demand] in runtime/comm/cuda_module.h). A cached
// calibration of this machine written by an
// older dapple lacks the newer figures, so `--cluster local` does not use it and plain
// `dapple calibrate` measures again. JSON `calibration_version` in `local`; absent: 0 (written
// before versions were). Raise it whenever calibrate measures something new.
inline constexpr int kCalibrationVersion = 4;

// The devices of a cluster that is one CPU machine (the `local` preset, a calibration of one
// machine): how each training process computes there, to compare with how a profile was
// measured (format/settings.h). JSON `local`.
struct LocalDevices {
  MachineIdentity machine;
  int threads_per_device = 1;  // what `dapple train` gives each of num_devices() processes
  // Whether the calibration timed the resume cost with cold caches (`dapple calibrate
  // --cold-caches`); unset: not calibrated (the guess).
  std::optional<bool> cold_caches;
  int calibration_version = kCalibrationVersion;  // Note [Calibration version]
  // The cores other work kept busy just before the calibration began (BusyCores over a
  // quarter second): it slows what calibrate times (local_cluster.h: MachineIsBusy). JSON
  // `busy_cores`; unset: not recorded.
  std::optional<double> busy_cores;
};

// Note [Emulated devices]
// When every device is a process on one machine (this machine's `local` cluster, servers
// emulated by processes), the processes share its cores, and the simulator charges what
// that costs. Devices of their own need none of it: the cost model and the engine speak of
// devices and links, and these terms reach the simulator through one door
// (CostModel::Emulation, sim/emulation/). JSON `emulation`; `dapple calibrate` measures it.
struct Emulation {
  // The compute the devices share, in devices computing alone: while k devices compute at
  // once each runs at min(1, shared_compute / k) of its speed (sim/emulation/shared_compute.cc).
  double shared_compute = 1;
  // The seconds a forward or backward takes beyond its compute when it starts after its
  // device was idle, because the other processes ran meanwhile (caches refilled, the
  // wake-up). `dapple calibrate` measures it with a token ring.
  double resume_s = 0;
  // The seconds a device that waits at a receive takes to go on once the message is there,
  // beyond the link's own time (its process wakes from a sleep and waits for a core the
  // others keep busy). The simulator adds it to every receive a device waits at. `dapple
  // calibrate` measures it as the mean delivery to a waiting rank in a token ring where the
  // other ranks compute (ranks - 1 tokens: with 2 ranks, one), minus the link's latency.
  double wake_s = 0;
  // The compute, in devices, that one stream over the intra- or inter-server link (a sender
  // sending, a receiver receiving, the kernel moving the bytes) takes from the shared cores
  // while it runs; a ring allreduce over r ranks runs r streams. `dapple calibrate` measures
  // it (with 3 or more ranks while the others compute, with 2 while both do).
  double intra_server_stream_load = 0;
  double inter_server_stream_load = 0;
};

struct Cluster {
  std::string name;
  std::vector<ServerSpec> servers;
  DeviceSpec device;
  LinkSpec intra_server;
  LinkSpec inter_server;
  std::optional<Emulation> emulation;  // Note [Emulated devices]
  std::optional<LocalDevices> local;

  // Devices are numbered server by server: server 0 holds 0..d0-1, and so on.
  int num_devices() const;
  int num_servers() const { return static_cast<int>(servers.size()); }
  int ServerOf(int device) const;              // REQUIRES: 0 <= device < num_devices()
  const DeviceSpec& Device(int device) const;  // the server's override or `device`
  int FirstDeviceOf(int server) const;
};

void ValidateCluster(const Cluster& c, const std::string& source);  // throws InputError
void ValidateEmulation(const Emulation& e, const std::string& source);
Cluster ReadClusterJson(const std::filesystem::path& path);
// Parses cluster JSON held in memory; `source` names it in errors. Validates.
Cluster ParseClusterJson(const std::string& text, const std::string& source);
void WriteClusterJson(const Cluster& c, const std::filesystem::path& path);  // atomic
std::string ClusterToJsonText(const Cluster& c);

// Presets: "paper-a" (2 x 8 V100 16 GB, 25 GB/s inside, 25 Gbit/s between), "paper-b"
// (16 x 1, 25 Gbit/s), "paper-c" (16 x 1, 10 Gbit/s), "local" (the guess for this machine:
// one server, one device per core, the machine's memory split among them, constant links;
// LoadCluster prefers a calibration, format/local_cluster.h). Throws InputError listing
// the known presets for an unknown name.
Cluster ClusterPreset(const std::string& name);
std::vector<std::string> ClusterPresetNames();
// A preset name or a path to a cluster JSON file. "local" is this machine's cached
// calibration when it is current, else the guess (LoadLocalCluster in local_cluster.h says
// which).
Cluster LoadCluster(const std::string& name_or_path);

}  // namespace dapple
