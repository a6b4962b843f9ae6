// Cluster JSON, presets and accessors.
#include "dapple/format/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string ClusterErrorOf(const std::string& json) {
  try {
    ParseClusterJson(json, "c.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Cluster, PaperPresets) {
  Cluster a = ClusterPreset("paper-a");
  EXPECT_EQ(a.num_servers(), 2);
  EXPECT_EQ(a.num_devices(), 16);
  EXPECT_DOUBLE_EQ(a.device.memory_bytes, 16e9);
  EXPECT_DOUBLE_EQ(a.intra_server.bandwidth_bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(a.inter_server.bandwidth_bytes_per_s, 3.125e9);
  Cluster b = ClusterPreset("paper-b");
  EXPECT_EQ(b.num_servers(), 16);
  EXPECT_EQ(b.num_devices(), 16);
  EXPECT_DOUBLE_EQ(b.inter_server.bandwidth_bytes_per_s, 3.125e9);
  Cluster c = ClusterPreset("paper-c");
  EXPECT_EQ(c.num_devices(), 16);
  EXPECT_DOUBLE_EQ(c.inter_server.bandwidth_bytes_per_s, 1.25e9);
  EXPECT_THAT(ClusterPresetNames(), ::testing::Contains("local"));
}

TEST(Cluster, LocalPresetIsThisMachine) {
  Cluster l = ClusterPreset("local");
  EXPECT_EQ(l.num_servers(), 1);
  EXPECT_EQ(l.num_devices(), sysconf(_SC_NPROCESSORS_ONLN));
  double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  EXPECT_NEAR(l.device.memory_bytes * l.num_devices(), memory, 1.0);
  EXPECT_NO_THROW(ValidateCluster(l, "local"));
}

TEST(Cluster, UnknownPresetListsKnownOnes) {
  try {
    LoadCluster("paper-z");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("paper-z"));
    EXPECT_THAT(e.what(), HasSubstr("paper-a"));
  }
}

TEST(Cluster, AccessorsAndMixedHardware) {
  Cluster c = ClusterPreset("paper-a");
  c.servers = {{2, std::nullopt}, {3, DeviceSpec{8e9, 2.0}}, {1, std::nullopt}};
  EXPECT_EQ(c.num_devices(), 6);
  EXPECT_EQ(c.ServerOf(0), 0);
  EXPECT_EQ(c.ServerOf(1), 0);
  EXPECT_EQ(c.ServerOf(2), 1);
  EXPECT_EQ(c.ServerOf(4), 1);
  EXPECT_EQ(c.ServerOf(5), 2);
  EXPECT_EQ(c.FirstDeviceOf(2), 5);
  EXPECT_DOUBLE_EQ(c.Device(3).speed, 2.0);
  EXPECT_DOUBLE_EQ(c.Device(5).memory_bytes, 16e9);
}

TEST(Cluster, RoundTripThroughFile) {
  Cluster c = ClusterPreset("paper-a");
  c.name = "mixed";
  c.servers[1].device = DeviceSpec{32e9, 1.5};
  c.inter_server.latency_s = 5e-6;
  fs::path path = fs::temp_directory_path() / fmt::format("dapple_cluster_{}.json", getpid());
  WriteClusterJson(c, path);
  Cluster d = LoadCluster(path.string());
  fs::remove(path);
  EXPECT_EQ(d.name, "mixed");
  ASSERT_EQ(d.num_servers(), 2);
  EXPECT_EQ(d.servers[0].devices, 8);
  EXPECT_FALSE(d.servers[0].device.has_value());
  ASSERT_TRUE(d.servers[1].device.has_value());
  EXPECT_EQ(d.servers[1].device->memory_bytes, 32e9);
  EXPECT_EQ(d.servers[1].device->speed, 1.5);
  EXPECT_EQ(d.intra_server.bandwidth_bytes_per_s, c.intra_server.bandwidth_bytes_per_s);
  EXPECT_EQ(d.inter_server.bandwidth_bytes_per_s, c.inter_server.bandwidth_bytes_per_s);
  EXPECT_EQ(d.inter_server.latency_s, 5e-6);
  EXPECT_EQ(ClusterToJsonText(d), ClusterToJsonText(c));
}

TEST(Cluster, DesignExampleParses) {
  Cluster c = ParseClusterJson(
      R"({"format": "dapple-cluster/1", "name": "paper-a", "servers": [{"devices": 8},
      {"devices": 8}], "device": {"memory_bytes": 16e9, "speed": 1.0}, "intra_server":
      {"bandwidth_bytes_per_s": 25e9, "latency_s": 0}, "inter_server":
      {"bandwidth_bytes_per_s": 3.125e9, "latency_s": 0}})",
      "c.json");
  EXPECT_EQ(ClusterToJsonText(c), ClusterToJsonText(ClusterPreset("paper-a")));
}

TEST(Cluster, AllReduceFieldsDefaultToTheLinkAndRoundTrip) {
  Cluster c = ClusterPreset("paper-a");
  EXPECT_FALSE(c.inter_server.allreduce_bandwidth_bytes_per_s.has_value());
  EXPECT_EQ(c.inter_server.AllReduceBandwidth(), 3.125e9);
  EXPECT_EQ(c.inter_server.AllReduceLatency(), 0.0);
  // Unset: not written, so existing files stay byte-identical.
  EXPECT_EQ(ClusterToJsonText(c).find("allreduce"), std::string::npos);
  c.intra_server.allreduce_bandwidth_bytes_per_s = 1.2e9;
  c.inter_server.allreduce_latency_s = 3e-5;
  Json j = Json::parse(ClusterToJsonText(c));
  EXPECT_EQ(j["intra_server"]["allreduce_bandwidth_bytes_per_s"].get<double>(), 1.2e9);
  EXPECT_FALSE(j["intra_server"].contains("allreduce_latency_s"));
  EXPECT_EQ(j["inter_server"]["allreduce_latency_s"].get<double>(), 3e-5);
  EXPECT_FALSE(j["inter_server"].contains("allreduce_bandwidth_bytes_per_s"));
  Cluster d = ParseClusterJson(j.dump(), "c.json");
  EXPECT_EQ(d.intra_server.AllReduceBandwidth(), 1.2e9);
  EXPECT_EQ(d.intra_server.AllReduceLatency(), 0.0);  // the link's latency_s
  EXPECT_EQ(d.inter_server.AllReduceBandwidth(), 3.125e9);
  EXPECT_EQ(d.inter_server.AllReduceLatency(), 3e-5);
  EXPECT_EQ(ClusterToJsonText(d), ClusterToJsonText(c));
  // One server without inter_server: it copies intra_server, allreduce fields included.
  Cluster one = ParseClusterJson(R"({"format": "dapple-cluster/1", "servers": [{"devices": 2}],
      "device": {"memory_bytes": 1e9}, "intra_server": {"bandwidth_bytes_per_s": 5e9,
      "allreduce_bandwidth_bytes_per_s": 4e8, "allreduce_latency_s": 1e-4}})",
                                 "one.json");
  EXPECT_EQ(one.inter_server.AllReduceBandwidth(), 4e8);
  EXPECT_EQ(one.inter_server.AllReduceLatency(), 1e-4);
}

TEST(Cluster, BadAllReduceFields) {
  const Json base = Json::parse(ClusterToJsonText(ClusterPreset("paper-a")));
  auto with = [&](const char* link, const char* field, Json v) {
    Json j = base;
    j[link][field] = v;
    return ClusterErrorOf(j.dump());
  };
  EXPECT_THAT(with("intra_server", "allreduce_bandwidth_bytes_per_s", 0),
              HasSubstr("c.json.intra_server.allreduce_bandwidth_bytes_per_s: must be positive"));
  EXPECT_THAT(with("inter_server", "allreduce_bandwidth_bytes_per_s", -1e9),
              HasSubstr("c.json.inter_server.allreduce_bandwidth_bytes_per_s: must be positive"));
  EXPECT_THAT(with("inter_server", "allreduce_latency_s", -1e-6),
              HasSubstr("c.json.inter_server.allreduce_latency_s: must not be negative"));
  EXPECT_THAT(with("intra_server", "allreduce_latency_s", "slow"),
              HasSubstr("c.json.intra_server.allreduce_latency_s: expected a number"));
  EXPECT_EQ(with("inter_server", "allreduce_latency_s", 0), "(no error)");
  // Built in code: ValidateCluster checks them too.
  Cluster c = ClusterPreset("paper-b");
  c.inter_server.allreduce_bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();
  try {
    ValidateCluster(c, "x");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("x: inter_server.allreduce_bandwidth_bytes_per_s: must be a "
                                    "finite number > 0"));
  }
  c = ClusterPreset("paper-b");
  c.intra_server.allreduce_latency_s = std::nan("");
  EXPECT_THROW(ValidateCluster(c, "x"), InputError);
}

// Note [Emulated devices]: one optional block, absent for devices of their own.
TEST(Cluster, EmulationIsOneOptionalBlockAndRoundTrips) {
  Cluster c = ClusterPreset("local");
  EXPECT_FALSE(c.emulation.has_value());
  EXPECT_EQ(ClusterToJsonText(c).find("emulation"), std::string::npos);
  c.emulation = Emulation{.shared_compute = 1.75,
                          .resume_s = 0.0004,
                          .wake_s = 0.0013,
                          .intra_server_stream_load = 0.5,
                          .inter_server_stream_load = 0.25};
  Cluster d = ParseClusterJson(ClusterToJsonText(c), "c.json");
  ASSERT_TRUE(d.emulation.has_value());
  EXPECT_EQ(d.emulation->shared_compute, 1.75);
  EXPECT_EQ(d.emulation->resume_s, 0.0004);
  EXPECT_EQ(d.emulation->wake_s, 0.0013);
  EXPECT_EQ(d.emulation->intra_server_stream_load, 0.5);
  EXPECT_EQ(d.emulation->inter_server_stream_load, 0.25);
  // Only shared_compute is required.
  Json only = Json::parse(ClusterToJsonText(c));
  only["emulation"] = {{"shared_compute", 2}};
  Cluster o = ParseClusterJson(only.dump(), "c.json");
  ASSERT_TRUE(o.emulation.has_value());
  EXPECT_EQ(o.emulation->shared_compute, 2);
  EXPECT_EQ(o.emulation->wake_s, 0);
  auto error_with = [&](const char* key, const Json& value) {
    Json j = Json::parse(ClusterToJsonText(c));
    j["emulation"][key] = value;
    return ClusterErrorOf(j.dump());
  };
  EXPECT_THAT(error_with("shared_compute", 0),
              HasSubstr("c.json.emulation.shared_compute: must be positive"));
  EXPECT_THAT(error_with("shared_compute", "two"),
              HasSubstr("c.json.emulation.shared_compute: expected a number"));
  EXPECT_THAT(error_with("resume_s", -1),
              HasSubstr("c.json.emulation.resume_s: must not be negative"));
  EXPECT_THAT(error_with("resume_s", 2),
              HasSubstr("emulation.resume_s: must be in [0, 1) seconds"));
  EXPECT_THAT(error_with("wake_s", 1.5), HasSubstr("emulation.wake_s: must be in [0, 1) seconds"));
  EXPECT_THAT(error_with("inter_server_stream_load", 100),
              HasSubstr("emulation.inter_server_stream_load: must be in [0, 64] devices"));
  EXPECT_THAT(error_with("intra_server_stream_load", -0.5),
              HasSubstr("c.json.emulation.intra_server_stream_load: must not be negative"));
}

// The terms outside the block (where an older dapple wrote them) are named, not ignored: a
// cluster read without them would be simulated as devices of their own.
TEST(Cluster, EmulationTermsOutsideTheBlockAreNamed) {
  Json j = Json::parse(ClusterToJsonText(ClusterPreset("local")));
  j["shared_compute"] = 1.5;
  EXPECT_THAT(ClusterErrorOf(j.dump()),
              HasSubstr("c.json.shared_compute: the terms of devices that share one machine go "
                        "in the `emulation` block"));
  j.erase("shared_compute");
  j["intra_server"]["compute_load"] = 0.5;
  EXPECT_THAT(ClusterErrorOf(j.dump()),
              HasSubstr("c.json.intra_server.compute_load: a link's compute load goes in "
                        "emulation.intra_server_stream_load"));
}

TEST(Cluster, ProcessMemoryIsOptionalPerDeviceAndRoundTrips) {
  Cluster c = ClusterPreset("paper-a");
  EXPECT_EQ(c.device.process_memory_bytes, 0);
  EXPECT_EQ(ClusterToJsonText(c).find("process_memory_bytes"), std::string::npos)
      << "absent when 0, so older files stay byte-identical";
  c.device.process_memory_bytes = 5e8;
  c.servers[1].device = DeviceSpec{32e9, 1.5};
  c.servers[1].device->process_memory_bytes = 7e8;
  Cluster d = ParseClusterJson(ClusterToJsonText(c), "c.json");
  EXPECT_EQ(d.Device(0).process_memory_bytes, 5e8);
  EXPECT_EQ(d.Device(8).process_memory_bytes, 7e8);
  EXPECT_EQ(ClusterToJsonText(d), ClusterToJsonText(c));
}

TEST(Cluster, BadInput) {
  const Json base = Json::parse(ClusterToJsonText(ClusterPreset("paper-a")));
  auto with = [&](auto edit) {
    Json j = base;
    edit(j);
    return ClusterErrorOf(j.dump());
  };
  EXPECT_THAT(ClusterErrorOf("{\"format\": "), HasSubstr("c.json: malformed JSON"));
  EXPECT_THAT(with([](Json& j) { j.erase("servers"); }), HasSubstr("c.json.servers: missing"));
  EXPECT_THAT(with([](Json& j) { j["servers"][1]["devices"] = -2; }),
              HasSubstr("c.json.servers[1].devices: must be positive"));
  EXPECT_THAT(with([](Json& j) { j["servers"][1]["devices"] = 1.5; }),
              HasSubstr("expected an integer"));
  EXPECT_THAT(with([](Json& j) { j["device"]["memory_bytes"] = -1; }),
              HasSubstr("c.json.device.memory_bytes: must be positive"));
  EXPECT_THAT(with([](Json& j) { j["inter_server"]["latency_s"] = -1; }),
              HasSubstr("c.json.inter_server.latency_s: must not be negative"));
  EXPECT_THAT(with([](Json& j) { j["servers"] = Json::array(); }), HasSubstr("no servers"));
  EXPECT_THAT(with([](Json& j) { j["device"]["process_memory_bytes"] = -1; }),
              HasSubstr("c.json.device.process_memory_bytes: must not be negative"));
  EXPECT_THAT(with([](Json& j) { j["device"]["process_memory_bytes"] = 16e9; }),
              HasSubstr("c.json: device.process_memory_bytes: must be >= 0 and below the "
                        "device's memory_bytes"));
  EXPECT_THAT(with([](Json& j) { j.erase("inter_server"); }), HasSubstr("inter_server: missing"));
  // One server needs no inter-server link.
  EXPECT_EQ(with([](Json& j) {
              j.erase("inter_server");
              j["servers"] = Json::parse(R"([{"devices": 4}])");
            }),
            "(no error)");
}

// Mixed hardware: a server's own device is checked like the cluster's, and its
// fields misplaced beside `devices` are named rather than ignored.
TEST(Cluster, BadServerDevice) {
  Json base = Json::parse(ClusterToJsonText(ClusterPreset("paper-a")));
  base["servers"][1]["device"] = Json::parse(R"({"memory_bytes": 32e9, "speed": 2})");
  auto with = [&](auto edit) {
    Json j = base;
    edit(j);
    return ClusterErrorOf(j.dump());
  };
  EXPECT_EQ(with([](Json&) {}), "(no error)");
  EXPECT_THAT(with([](Json& j) { j["servers"][1]["device"]["speed"] = 0; }),
              HasSubstr("c.json.servers[1].device.speed: must be positive (got 0)"));
  EXPECT_THAT(with([](Json& j) { j["servers"][1]["device"]["speed"] = -2; }),
              HasSubstr("c.json.servers[1].device.speed: must be positive (got -2)"));
  EXPECT_THAT(with([](Json& j) { j["servers"][1]["device"]["speed"] = "fast"; }),
              HasSubstr("c.json.servers[1].device.speed: expected a number"));
  EXPECT_THAT(with([](Json& j) { j["servers"][1]["device"].erase("memory_bytes"); }),
              HasSubstr("c.json.servers[1].device.memory_bytes: missing"));
  EXPECT_THAT(with([](Json& j) { j["servers"][1]["device"]["process_memory_bytes"] = 40e9; }),
              HasSubstr("c.json: servers[1].device.process_memory_bytes: must be >= 0 and below "
                        "the device's memory_bytes 32000000000"));
  // One spec per device is not the format: a server's devices are alike.
  EXPECT_THAT(
      with([](Json& j) { j["servers"][1]["device"] = Json::parse(R"([{"memory_bytes": 32e9}])"); }),
      HasSubstr("c.json.servers[1].device: expected an object"));
  for (const char* key : {"speed", "memory_bytes", "process_memory_bytes"}) {
    EXPECT_THAT(with([&](Json& j) { j["servers"][0][key] = 2; }),
                HasSubstr(fmt::format("c.json.servers[0].{}: a server's own device goes in "
                                      "servers[0].device (e.g. {{\"devices\": 8, \"device\"",
                                      key)))
        << key;
  }
  // ValidateCluster on a cluster built in code names the same fields.
  Cluster c = ClusterPreset("paper-a");
  c.servers[1].device = DeviceSpec{16e9, std::nan("")};
  EXPECT_THROW(
      try { ValidateCluster(c, "built"); } catch (const InputError& e) {
        EXPECT_THAT(e.what(), HasSubstr("built: servers[1].device.speed: must be a finite number"));
        throw;
      },
      InputError);
  c.servers[1].device = DeviceSpec{16e9, 2};
  c.servers[1].device->process_memory_bytes = 16e9;
  EXPECT_THROW(ValidateCluster(c, "built"), InputError);
}

// The example of a mixed cluster in examples/clusters parses and says what its name says.
TEST(Cluster, MixedExampleParses) {
  Cluster c =
      ReadClusterJson(fs::path(DAPPLE_SOURCE_DIR) / "examples/clusters/mixed-8fast-8slow.json");
  EXPECT_EQ(c.num_devices(), 16);
  for (int d = 0; d < 16; ++d) {
    EXPECT_EQ(c.Device(d).speed, d < 8 ? 2.0 : 1.0) << d;
    EXPECT_EQ(c.Device(d).memory_bytes, d < 8 ? 32e9 : 16e9) << d;
  }
  EXPECT_EQ(ClusterToJsonText(c), ClusterToJsonText(ParseClusterJson(ClusterToJsonText(c), "x")));
}

}  // namespace
}  // namespace dapple
