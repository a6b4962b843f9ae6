// Cluster accessors, validation, `dapple-cluster/1` reader/writer and the presets.
#include "dapple/format/cluster.h"

#include <cmath>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"
#include "dapple/format/json_text.h"
#include "dapple/format/local_cluster.h"
#include "dapple/format/settings.h"

namespace dapple {
namespace {

constexpr const char* kClusterFormat = "dapple-cluster/1";

// The `local` preset's link: shared memory between processes of one machine. A documented
// constant, not a measurement (a calibration step may replace it).
constexpr double kLocalBandwidthBytesPerS = 5e9;
constexpr double kLocalLatencyS = 20e-6;

DeviceSpec ReadDevice(const JsonField& f) {
  DeviceSpec d;
  d.memory_bytes = f["memory_bytes"].Positive();
  d.speed = f.Has("speed") ? f["speed"].Positive() : 1.0;
  if (f.Has("process_memory_bytes"))
    d.process_memory_bytes = f["process_memory_bytes"].NonNegative();
  return d;
}

LinkSpec ReadLink(const JsonField& f) {
  LinkSpec l;
  l.bandwidth_bytes_per_s = f["bandwidth_bytes_per_s"].Positive();
  l.latency_s = f.Has("latency_s") ? f["latency_s"].NonNegative() : 0.0;
  if (f.Has("allreduce_bandwidth_bytes_per_s"))
    l.allreduce_bandwidth_bytes_per_s = f["allreduce_bandwidth_bytes_per_s"].Positive();
  if (f.Has("allreduce_latency_s")) l.allreduce_latency_s = f["allreduce_latency_s"].NonNegative();
  if (f.Has("compute_load"))
    f["compute_load"].Fail(
        "a link's compute load goes in emulation.intra_server_stream_load or "
        "inter_server_stream_load (Note [Emulated devices])");
  return l;
}

nlohmann::ordered_json DeviceJson(const DeviceSpec& d) {
  nlohmann::ordered_json o = {{"memory_bytes", d.memory_bytes}, {"speed", d.speed}};
  if (d.process_memory_bytes > 0) o["process_memory_bytes"] = d.process_memory_bytes;
  return o;
}

// The allreduce fields only when set, so clusters without them stay byte-identical.
nlohmann::ordered_json LinkJson(const LinkSpec& l) {
  nlohmann::ordered_json o = {{"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s},
                              {"latency_s", l.latency_s}};
  if (l.allreduce_bandwidth_bytes_per_s)
    o["allreduce_bandwidth_bytes_per_s"] = *l.allreduce_bandwidth_bytes_per_s;
  if (l.allreduce_latency_s) o["allreduce_latency_s"] = *l.allreduce_latency_s;
  return o;
}

Emulation ReadEmulation(const JsonField& f) {
  f.ExpectObject();
  Emulation e;
  e.shared_compute = f["shared_compute"].Positive();
  if (f.Has("resume_s")) e.resume_s = f["resume_s"].NonNegative();
  if (f.Has("wake_s")) e.wake_s = f["wake_s"].NonNegative();
  if (f.Has("intra_server_stream_load"))
    e.intra_server_stream_load = f["intra_server_stream_load"].NonNegative();
  if (f.Has("inter_server_stream_load"))
    e.inter_server_stream_load = f["inter_server_stream_load"].NonNegative();
  return e;
}

nlohmann::ordered_json EmulationJson(const Emulation& e) {
  return {{"shared_compute", e.shared_compute},
          {"resume_s", e.resume_s},
          {"wake_s", e.wake_s},
          {"intra_server_stream_load", e.intra_server_stream_load},
          {"inter_server_stream_load", e.inter_server_stream_load}};
}

Cluster Uniform(std::string name, int servers, int devices_per_server, double memory_bytes,
                LinkSpec intra, LinkSpec inter) {
  Cluster c;
  c.name = std::move(name);
  c.servers.assign(servers, ServerSpec{devices_per_server, std::nullopt});
  c.device = DeviceSpec{memory_bytes, 1.0};
  c.intra_server = intra;
  c.inter_server = inter;
  return c;
}

}  // namespace

int Cluster::num_devices() const {
  int n = 0;
  for (const ServerSpec& s : servers) n += s.devices;
  return n;
}

int Cluster::ServerOf(int device) const {
  DAPPLE_CHECK(device >= 0, "Cluster::ServerOf: negative device");
  for (int s = 0; s < num_servers(); ++s) {
    if (device < servers[s].devices) return s;
    device -= servers[s].devices;
  }
  DAPPLE_CHECK(false, "Cluster::ServerOf: device out of range");
  return -1;
}

const DeviceSpec& Cluster::Device(int device) const {
  const ServerSpec& s = servers[ServerOf(device)];
  return s.device ? *s.device : this->device;
}

int Cluster::FirstDeviceOf(int server) const {
  DAPPLE_CHECK(server >= 0 && server < num_servers(), "Cluster::FirstDeviceOf: out of range");
  int first = 0;
  for (int s = 0; s < server; ++s) first += servers[s].devices;
  return first;
}

void ValidateEmulation(const Emulation& e, const std::string& source) {
  if (!std::isfinite(e.shared_compute) || e.shared_compute <= 0)
    ThrowInput("{}: emulation.shared_compute: must be a finite number > 0 (got {})", source,
               e.shared_compute);
  for (auto [v, field] : {std::pair{e.resume_s, "resume_s"}, std::pair{e.wake_s, "wake_s"}}) {
    if (!(v >= 0 && v < 1))
      ThrowInput("{}: emulation.{}: must be in [0, 1) seconds (got {})", source, field, v);
  }
  for (auto [v, field] : {std::pair{e.intra_server_stream_load, "intra_server_stream_load"},
                          std::pair{e.inter_server_stream_load, "inter_server_stream_load"}}) {
    if (!(v >= 0 && v <= 64))
      ThrowInput("{}: emulation.{}: must be in [0, 64] devices (got {})", source, field, v);
  }
}

void ValidateCluster(const Cluster& c, const std::string& source) {
  auto positive = [&](double v, const std::string& field) {
    if (!std::isfinite(v) || v <= 0)
      ThrowInput("{}: {}: must be a finite number > 0 (got {})", source, field, v);
  };
  auto device = [&](const DeviceSpec& d, const std::string& where) {
    positive(d.memory_bytes, where + ".memory_bytes");
    positive(d.speed, where + ".speed");
    if (!std::isfinite(d.process_memory_bytes) || d.process_memory_bytes < 0 ||
        d.process_memory_bytes >= d.memory_bytes)
      ThrowInput(
          "{}: {}.process_memory_bytes: must be >= 0 and below the device's memory_bytes "
          "{} (got {})",
          source, where, d.memory_bytes, d.process_memory_bytes);
  };
  auto non_negative = [&](double v, const std::string& field) {
    if (!std::isfinite(v) || v < 0)
      ThrowInput("{}: {}: must be a finite number >= 0 (got {})", source, field, v);
  };
  auto link = [&](const LinkSpec& l, const std::string& where) {
    positive(l.bandwidth_bytes_per_s, where + ".bandwidth_bytes_per_s");
    non_negative(l.latency_s, where + ".latency_s");
    if (l.allreduce_bandwidth_bytes_per_s)
      positive(*l.allreduce_bandwidth_bytes_per_s, where + ".allreduce_bandwidth_bytes_per_s");
    if (l.allreduce_latency_s) non_negative(*l.allreduce_latency_s, where + ".allreduce_latency_s");
  };
  if (c.servers.empty()) ThrowInput("{}: servers: the cluster has no servers", source);
  long total = 0;
  for (size_t s = 0; s < c.servers.size(); ++s) {
    if (c.servers[s].devices <= 0)
      ThrowInput("{}: servers[{}].devices: must be positive (got {})", source, s,
                 c.servers[s].devices);
    total += c.servers[s].devices;
    if (total > 1000000) ThrowInput("{}: servers: more than a million devices", source);
    if (c.servers[s].device) device(*c.servers[s].device, fmt::format("servers[{}].device", s));
  }
  device(c.device, "device");
  link(c.intra_server, "intra_server");
  link(c.inter_server, "inter_server");
  if (c.emulation) ValidateEmulation(*c.emulation, source);
}

Cluster ParseClusterJson(const std::string& text, const std::string& source) {
  Json j = format_internal::ParseJsonText(text, source);
  JsonField root(j, source);
  format_internal::ExpectFormat(root, kClusterFormat);
  Cluster c;
  c.name = root.Has("name") ? root["name"].String() : std::filesystem::path(source).stem().string();
  JsonField servers = root["servers"];
  for (size_t s = 0; s < servers.size(); ++s) {
    JsonField f = servers[s];
    ServerSpec server;
    server.devices = f["devices"].PositiveInt();
    // A device field beside `devices` would be ignored and the server planned as the
    // default device: name it (mixed hardware goes in the server's own `device`).
    for (const char* key : {"memory_bytes", "speed", "process_memory_bytes"}) {
      if (f.Has(key))
        f[key].Fail(
            fmt::format("a server's own device goes in servers[{}].device (e.g. {{\"devices\": "
                        "{}, \"device\": {{\"memory_bytes\": 16e9, \"speed\": 2}}}})",
                        s, server.devices));
    }
    if (f.Has("device")) server.device = ReadDevice(f["device"]);
    c.servers.push_back(server);
  }
  c.device = ReadDevice(root["device"]);
  c.intra_server = ReadLink(root["intra_server"]);
  // One server needs no network: inter_server may then be left out.
  if (root.Has("inter_server") || c.servers.size() != 1)
    c.inter_server = ReadLink(root["inter_server"]);
  else
    c.inter_server = c.intra_server;
  for (const char* key : {"shared_compute", "shared_compute_resume_s", "shared_compute_wake_s"}) {
    if (root.Has(key))
      root[key].Fail(
          "the terms of devices that share one machine go in the `emulation` block "
          "(Note [Emulated devices]; `dapple calibrate` writes it)");
  }
  if (root.Has("emulation")) c.emulation = ReadEmulation(root["emulation"]);
  if (root.Has("local")) c.local = ReadLocalDevices(root["local"]);
  ValidateCluster(c, source);
  return c;
}

Cluster ReadClusterJson(const std::filesystem::path& path) {
  return ParseClusterJson(format_internal::ReadTextFile(path.string()), path.string());
}

std::string ClusterToJsonText(const Cluster& c) {
  nlohmann::ordered_json root;
  root["format"] = kClusterFormat;
  root["name"] = c.name;
  nlohmann::ordered_json servers = nlohmann::ordered_json::array();
  for (const ServerSpec& s : c.servers) {
    nlohmann::ordered_json o;
    o["devices"] = s.devices;
    if (s.device) o["device"] = DeviceJson(*s.device);
    servers.push_back(std::move(o));
  }
  root["servers"] = std::move(servers);
  root["device"] = DeviceJson(c.device);
  root["intra_server"] = LinkJson(c.intra_server);
  root["inter_server"] = LinkJson(c.inter_server);
  if (c.emulation) root["emulation"] = EmulationJson(*c.emulation);
  if (c.local) root["local"] = LocalDevicesToJson(*c.local);
  return root.dump(2) + "\n";
}

void WriteClusterJson(const Cluster& c, const std::filesystem::path& path) {
  WriteFileAtomic(path, ClusterToJsonText(c));
}

std::vector<std::string> ClusterPresetNames() { return {"paper-a", "paper-b", "paper-c", "local"}; }

Cluster ClusterPreset(const std::string& name) {
  constexpr double kV100Memory = 16e9;  // 16 GB V100
  const LinkSpec nvlink{25e9, 0};       // 25 GB/s inside a server
  const LinkSpec eth25{25e9 / 8, 0};    // 25 Gbit/s Ethernet = 3.125e9 B/s
  const LinkSpec eth10{10e9 / 8, 0};    // 10 Gbit/s Ethernet = 1.25e9 B/s
  if (name == "paper-a") return Uniform(name, 2, 8, kV100Memory, nvlink, eth25);
  if (name == "paper-b") return Uniform(name, 16, 1, kV100Memory, nvlink, eth25);
  if (name == "paper-c") return Uniform(name, 16, 1, kV100Memory, nvlink, eth10);
  if (name == "local") {
    MachineIdentity m = ThisMachine();
    double memory = m.memory_bytes > 0 ? m.memory_bytes : 8e9;
    const LinkSpec shm{kLocalBandwidthBytesPerS, kLocalLatencyS};
    Cluster c = Uniform(name, 1, m.cores, memory / m.cores, shm, shm);
    c.local = LocalDevices{m, ThreadsPerProcess(m.cores, m.cores), std::nullopt,
                           kCalibrationVersion, std::nullopt};
    return c;
  }
  std::string known;
  for (const std::string& n : ClusterPresetNames()) known += (known.empty() ? "" : ", ") + n;
  ThrowInput("unknown cluster preset '{}' (known: {})", name, known);
}

Cluster LoadCluster(const std::string& name_or_path) {
  if (name_or_path == "local") return LoadLocalCluster().cluster;
  for (const std::string& n : ClusterPresetNames())
    if (n == name_or_path) return ClusterPreset(n);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(name_or_path, ec)) {
    std::string known;
    for (const std::string& n : ClusterPresetNames()) known += (known.empty() ? "" : ", ") + n;
    ThrowInput("cluster '{}': neither a preset ({}) nor a readable file", name_or_path, known);
  }
  return ReadClusterJson(name_or_path);
}

}  // namespace dapple
