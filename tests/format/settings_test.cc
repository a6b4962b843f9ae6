// Profile settings and local devices in JSON, and the warning when a profile was measured
// unlike the cluster's devices compute.
#include "dapple/format/settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dapple/common/error.h"

namespace dapple {
namespace {

using ::testing::HasSubstr;

MachineIdentity Box() { return {"Test CPU 9000", 8, 32e9, "box", "abc"}; }

Profile TwoLayers(int threads, bool cold) {
  Profile p;
  p.model = "mlp";
  p.batch_size = 4;
  for (const char* id : {"a", "b"}) {
    LayerProfile l;
    l.id = l.name = id;
    l.forward_ms = 1;
    l.backward_ms = 2;
    l.activation_bytes = 16;
    l.parameter_bytes = 8;
    p.layers.push_back(l);
  }
  p.settings = ProfileSettings{threads, {1, 2, 4}, "adam", cold, Box()};
  return p;
}

// Box's `local` cluster of `devices` processes.
Cluster Local(int devices, std::optional<bool> cold) {
  Cluster c;
  c.name = "local";
  c.servers = {ServerSpec{devices, std::nullopt}};
  c.local =
      LocalDevices{Box(), ThreadsPerProcess(8, devices), cold, kCalibrationVersion, std::nullopt};
  return c;
}

TEST(ProfileSettings, RoundTripThroughProfileJson) {
  Profile p = TwoLayers(2, true);
  Profile q = ParseProfileJson(ProfileToJsonText(p), "p.json");
  ASSERT_TRUE(q.settings.has_value());
  EXPECT_EQ(q.settings->threads, 2);
  EXPECT_EQ(q.settings->batch_sizes, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(q.settings->optimizer, "adam");
  EXPECT_TRUE(q.settings->cold_caches);
  EXPECT_FALSE(q.settings->machine.DifferenceTo(Box()).has_value());
  // Old profiles have none, and stay without.
  p.settings.reset();
  EXPECT_EQ(ProfileToJsonText(p).find("settings"), std::string::npos);
  EXPECT_FALSE(ParseProfileJson(ProfileToJsonText(p), "p.json").settings.has_value());
}

TEST(ProfileSettings, BadFieldsAreNamed) {
  Json j = Json::parse(ProfileToJsonText(TwoLayers(2, false)));
  j["settings"]["caches"] = "lukewarm";
  try {
    ParseProfileJson(j.dump(), "p.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("p.json.settings.caches"));
  }
  j["settings"]["caches"] = "warm";
  j["settings"]["threads"] = 0;
  EXPECT_THROW(ParseProfileJson(j.dump(), "p.json"), InputError);
}

TEST(LocalDevices, RoundTripThroughClusterJson) {
  Cluster c = Local(4, false);
  c.device = DeviceSpec{};
  Cluster d = ParseClusterJson(ClusterToJsonText(c), "c.json");
  ASSERT_TRUE(d.local.has_value());
  EXPECT_EQ(d.local->threads_per_device, 2);
  EXPECT_EQ(d.local->cold_caches, false);
  EXPECT_EQ(d.local->machine.hostname, "box");
  c.local->cold_caches.reset();  // the guess: not calibrated
  EXPECT_FALSE(ParseClusterJson(ClusterToJsonText(c), "c.json").local->cold_caches.has_value());
}

TEST(SettingsMismatch, NoneWhenMeasuredAsTheDevicesRun) {
  EXPECT_FALSE(SettingsMismatch(TwoLayers(2, true), Local(4, true)).has_value());
  EXPECT_FALSE(SettingsMismatch(TwoLayers(1, false), Local(8, std::nullopt)).has_value())
      << "the guess does not know the caches";
}

TEST(SettingsMismatch, ThreadsNamedWithTheFlagThatMatches) {
  auto w = SettingsMismatch(TwoLayers(8, false), Local(8, std::nullopt));
  ASSERT_TRUE(w.has_value());
  EXPECT_THAT(*w, HasSubstr("8 threads against 1 per device"));
  EXPECT_THAT(*w, HasSubstr("--threads 1"));
  EXPECT_EQ(w->find('\n'), std::string::npos) << "one line";
}

TEST(SettingsMismatch, CachesAndMachineNamed) {
  auto w = SettingsMismatch(TwoLayers(2, false), Local(4, true));
  ASSERT_TRUE(w.has_value());
  EXPECT_THAT(*w, HasSubstr("warm caches against a calibration with cold caches"));
  EXPECT_THAT(*w, HasSubstr("--cold-caches"));
  Cluster other = Local(4, std::nullopt);
  other.local->machine.cpu = "Other CPU";
  w = SettingsMismatch(TwoLayers(2, false), other);
  ASSERT_TRUE(w.has_value());
  EXPECT_THAT(*w, HasSubstr("Other CPU"));
}

TEST(SettingsMismatch, NothingToCompareWithoutBothSides) {
  Profile old = TwoLayers(8, false);
  old.settings.reset();
  EXPECT_FALSE(SettingsMismatch(old, Local(8, true)).has_value());
  Cluster paper = Local(8, true);
  paper.local.reset();  // other hardware
  EXPECT_FALSE(SettingsMismatch(TwoLayers(8, false), paper).has_value());
}

}  // namespace
}  // namespace dapple
