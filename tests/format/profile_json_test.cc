// Profile JSON: round trip, validation errors, LoadProfile dispatch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"
#include "dapple/format/profile.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

Profile SmallProfile() {
  Profile p;
  p.model = "toy";
  p.device = "cpu";
  p.batch_size = 4;
  p.batch_sizes = {2, 4, 8};
  for (int i = 0; i < 3; ++i) {
    LayerProfile l;
    l.id = fmt::format("l{}", i);
    l.name = fmt::format("Linear({})", i);
    l.forward_ms = 1.5 + i;
    l.backward_ms = 0.1 * (i + 1);
    l.activation_bytes = 1000.0 * (i + 1);
    l.parameter_bytes = 1e9 / 3;
    if (i == 1) l.saved_bytes = 77;
    if (i < 2) l.update_ms = 0.25 * (i + 1);  // l2: not measured (0)
    l.forward_ms_by_batch = {1, 1.5 + i, 4};
    l.backward_ms_by_batch = {0.5, 0.1 * (i + 1), 2};
    p.layers.push_back(l);
  }
  p.edges = {{0, 1}, {0, 2}, {1, 2}};
  p.metadata = {{"threads", "2"}, {"blas", "openblas"}};
  return p;
}

std::string ProfileErrorOf(const std::string& json) {
  try {
    ParseProfileJson(json, "p.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ProfileJson, RoundTrip) {
  Profile p = SmallProfile();
  Profile q = ParseProfileJson(ProfileToJsonText(p), "p.json");
  EXPECT_EQ(q.model, p.model);
  EXPECT_EQ(q.device, p.device);
  EXPECT_EQ(q.batch_size, p.batch_size);
  EXPECT_EQ(q.batch_sizes, p.batch_sizes);
  EXPECT_EQ(q.edges, p.edges);
  EXPECT_EQ(q.metadata, p.metadata);
  ASSERT_EQ(q.num_layers(), 3);
  for (int i = 0; i < 3; ++i) {
    const LayerProfile &a = p.layers[i], &b = q.layers[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.forward_ms, b.forward_ms);  // exact: doubles print round-trippably
    EXPECT_EQ(a.backward_ms, b.backward_ms);
    EXPECT_EQ(a.activation_bytes, b.activation_bytes);
    EXPECT_EQ(a.parameter_bytes, b.parameter_bytes);
    EXPECT_EQ(a.saved_bytes, b.saved_bytes);
    EXPECT_EQ(a.update_ms, b.update_ms);
    EXPECT_EQ(a.forward_ms_by_batch, b.forward_ms_by_batch);
    EXPECT_EQ(a.backward_ms_by_batch, b.backward_ms_by_batch);
  }
}

// Note [Mixed precision]: the precision a profile was measured in; absent (older files) is
// float32 and writes back without the field; an unknown name is an error naming the field.
TEST(ProfileJson, PrecisionRoundTripsAndDefaultsToFloat32) {
  Profile p = SmallProfile();
  const std::string f32 = ProfileToJsonText(p);
  EXPECT_EQ(f32.find("precision"), std::string::npos);
  EXPECT_EQ(ParseProfileJson(f32, "p.json").precision, Precision::kFloat32);
  p.precision = Precision::kBf16;
  const std::string bf16 = ProfileToJsonText(p);
  Profile q = ParseProfileJson(bf16, "p.json");
  EXPECT_EQ(q.precision, Precision::kBf16);
  EXPECT_EQ(ProfileToJsonText(q), bf16);
  Json j = Json::parse(bf16);
  EXPECT_EQ(j["precision"], "bf16");
  j["precision"] = "half";
  EXPECT_THAT(ProfileErrorOf(j.dump()),
              HasSubstr("p.json.precision: unknown precision 'half' (known: float32, bf16)"));
}

TEST(ProfileJson, UpdateMsIsOptionalAndWrittenOnlyWhenSet) {
  Profile p = SmallProfile();
  Json j = Json::parse(ProfileToJsonText(p));
  EXPECT_EQ(j["layers"][1]["update_ms"].get<double>(), 0.5);
  EXPECT_FALSE(j["layers"][2].contains("update_ms"));
  // A profile without the field reads as 0 and writes back without it (byte-identical).
  for (LayerProfile& l : p.layers) l.update_ms = 0;
  std::string text = ProfileToJsonText(p);
  EXPECT_EQ(text.find("update_ms"), std::string::npos);
  Profile q = ParseProfileJson(text, "p.json");
  for (const LayerProfile& l : q.layers) EXPECT_EQ(l.update_ms, 0.0);
  EXPECT_EQ(ProfileToJsonText(q), text);
}

// Note [Data in the memory figure]: written when recorded, read back, refused when negative.
TEST(ProfileJson, DataBytesRoundTrip) {
  Profile p = SmallProfile();
  EXPECT_FALSE(Json::parse(ProfileToJsonText(p)).contains("data_input_bytes"));
  p.data_input_bytes = 4096;
  p.data_target_bytes = 64;
  Profile q = ParseProfileJson(ProfileToJsonText(p), "p.json");
  EXPECT_EQ(q.data_input_bytes, 4096);
  EXPECT_EQ(q.data_target_bytes, 64);
  Json j = Json::parse(ProfileToJsonText(p));
  j["data_target_bytes"] = -1;
  EXPECT_THAT(ProfileErrorOf(j.dump()), HasSubstr("data_target_bytes"));
}

TEST(ProfileJson, BadUpdateMs) {
  Json j = Json::parse(ProfileToJsonText(SmallProfile()));
  j["layers"][1]["update_ms"] = -0.5;
  EXPECT_THAT(ProfileErrorOf(j.dump()),
              HasSubstr("p.json.layers[1].update_ms: must not be negative"));
  j["layers"][1]["update_ms"] = "fast";
  EXPECT_THAT(ProfileErrorOf(j.dump()), HasSubstr("p.json.layers[1].update_ms: expected a number"));
  // JSON has no inf or NaN; a profile built in code is checked by ValidateProfile.
  Profile p = SmallProfile();
  p.layers[2].update_ms = std::numeric_limits<double>::infinity();
  try {
    ValidateProfile(p, "x");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("x: layers[2].update_ms: must be a finite number >= 0"));
  }
  p.layers[2].update_ms = std::nan("");
  EXPECT_THROW(ValidateProfile(p, "x"), InputError);
}

TEST(ProfileJson, WriteIsAtomicAndLoadProfileDetectsJson) {
  fs::path dir = fs::temp_directory_path() / fmt::format("dapple_profile_{}", getpid());
  fs::create_directories(dir);
  fs::path path = dir / "toy.json";
  WriteProfileJson(SmallProfile(), path);
  EXPECT_EQ(ReadProfileJson(path).num_layers(), 3);
  EXPECT_EQ(LoadProfile(path).batch_size, 4);
  EXPECT_EQ(LoadProfile(path, 16).batch_size, 16);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);  // no temporary left behind
  fs::remove_all(dir);
}

TEST(ProfileJson, IndexOf) {
  Profile p = SmallProfile();
  EXPECT_EQ(p.IndexOf("l2"), 2);
  EXPECT_EQ(p.IndexOf("nope"), -1);
}

TEST(ProfileJson, CutBytesChainAndGraph) {
  Profile p = SmallProfile();
  EXPECT_DOUBLE_EQ(p.CutBytes(0), 1000);         // l0 -> l1, l0 -> l2
  EXPECT_DOUBLE_EQ(p.CutBytes(1), 1000 + 2000);  // l0 -> l2 and l1 -> l2 cross
  EXPECT_DOUBLE_EQ(p.CutBytes(2), 0);
  Profile chain = SmallProfile();
  chain.edges.clear();
  EXPECT_DOUBLE_EQ(chain.CutBytes(0), 1000);
  EXPECT_DOUBLE_EQ(chain.CutBytes(1), 2000);
}

TEST(ProfileJson, MalformedJson) {
  EXPECT_THAT(ProfileErrorOf("{\"format\": \"dapple-profile/1\", "),
              HasSubstr("p.json: malformed JSON"));
  EXPECT_THAT(ProfileErrorOf("[1, 2]"), HasSubstr("p.json"));
  // A number beyond double is nlohmann's out_of_range, not a parse_error (found by fuzzing).
  EXPECT_THAT(ProfileErrorOf("{\"format\": 1e999}"), HasSubstr("p.json: malformed JSON"));
}

TEST(ProfileJson, MissingNegativeAndInconsistentFields) {
  const Json base = Json::parse(ProfileToJsonText(SmallProfile()));
  auto with = [&](auto edit) {
    Json j = base;
    edit(j);
    return ProfileErrorOf(j.dump());
  };
  EXPECT_THAT(with([](Json& j) { j["layers"][0].erase("forward_ms"); }),
              HasSubstr("p.json.layers[0].forward_ms: missing"));
  EXPECT_THAT(with([](Json& j) { j["layers"][0]["forward_ms"] = -1.5; }),
              HasSubstr("p.json.layers[0].forward_ms: must not be negative"));
  EXPECT_THAT(with([](Json& j) { j["layers"][2]["activation_bytes"] = "big"; }),
              HasSubstr("p.json.layers[2].activation_bytes: expected a number"));
  EXPECT_THAT(with([](Json& j) { j["batch_size"] = 0; }),
              HasSubstr("batch_size: must be positive"));
  EXPECT_THAT(with([](Json& j) { j.erase("batch_size"); }), HasSubstr("batch_size: missing"));
  EXPECT_THAT(with([](Json& j) { j["format"] = "dapple-profile/9"; }),
              HasSubstr("format: expected \"dapple-profile/1\""));
  EXPECT_THAT(with([](Json& j) { j["layers"][1]["id"] = "l0"; }), HasSubstr("not unique"));
  EXPECT_THAT(with([](Json& j) { j["layers"][0]["forward_ms_by_batch"] = {1}; }),
              HasSubstr("forward_ms_by_batch: has 1 values but batch_sizes has 3"));
  EXPECT_THAT(with([](Json& j) { j["edges"][2] = {"l2", "l1"}; }), HasSubstr("topological order"));
  EXPECT_THAT(with([](Json& j) {
                j["edges"][2] = {"l1", "zz"};
              }),
              HasSubstr("p.json.edges[2][1]: no layer has id 'zz'"));
  EXPECT_THAT(with([](Json& j) {
                j["layers"][0]["forward_ms"] = 1e308;
                j["layers"][1]["forward_ms"] = 1e308;
              }),
              HasSubstr("add up beyond the range of double"));
  EXPECT_THAT(with([](Json& j) { j["metadata"]["threads"] = 2; }),
              HasSubstr("metadata.threads: expected a string"));
  EXPECT_THAT(with([](Json& j) {
                j["layers"] = Json::array();
                j.erase("edges");
              }),
              HasSubstr("no layers"));
}

TEST(ProfileJson, ValidateProfileRejectsBadEdgesAndBatchSizes) {
  Profile p = SmallProfile();
  p.edges.push_back({2, 1});
  EXPECT_THROW(ValidateProfile(p, "x"), InputError);
  p = SmallProfile();
  p.batch_sizes = {4, 2, 8};
  EXPECT_THROW(ValidateProfile(p, "x"), InputError);
  p = SmallProfile();
  p.layers[2].activation_bytes = std::nan("");
  EXPECT_THROW(ValidateProfile(p, "x"), InputError);
  EXPECT_NO_THROW(ValidateProfile(SmallProfile(), "x"));
}

}  // namespace
}  // namespace dapple

namespace dapple {
namespace {

TEST(ProfileJson, BackwardSplitRoundTripsAndGoesTogether) {
  Profile p = SmallProfile();
  for (LayerProfile& l : p.layers) {
    l.backward_input_ms = 0.06;
    l.backward_weight_ms = 0.05;
    l.backward_input_ms_by_batch = {0.3, 0.06, 1.1};
    l.backward_weight_ms_by_batch = {0.25, 0.05, 1.0};
  }
  p.layers[2].backward_input_ms_by_batch.clear();  // optional per list
  p.layers[2].backward_weight_ms_by_batch.clear();
  Profile q = ParseProfileJson(ProfileToJsonText(p), "split");
  for (int i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(q.layers[i].backward_input_ms, 0.06);
    EXPECT_DOUBLE_EQ(q.layers[i].backward_weight_ms, 0.05);
    EXPECT_EQ(q.layers[i].backward_input_ms_by_batch, p.layers[i].backward_input_ms_by_batch);
    EXPECT_EQ(q.layers[i].backward_weight_ms_by_batch, p.layers[i].backward_weight_ms_by_batch);
  }
  // Without the split nothing is written, so older profiles stay byte-identical.
  EXPECT_THAT(ProfileToJsonText(SmallProfile()), ::testing::Not(HasSubstr("backward_input")));
  EXPECT_FALSE(
      ParseProfileJson(ProfileToJsonText(SmallProfile()), "x").layers[0].has_backward_split());

  Profile half = SmallProfile();
  half.layers[1].backward_input_ms = 0.1;
  try {
    ValidateProfile(half, "p.json");
    FAIL() << "accepted a lone backward_input_ms";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "p.json: layers[1].backward_weight_ms: missing (backward_input_ms and "
                 "backward_weight_ms go together)");
  }
  Profile misaligned = p;
  misaligned.layers[0].backward_weight_ms_by_batch = {1, 2};
  EXPECT_THROW(ValidateProfile(misaligned, "p.json"), InputError);
}

}  // namespace
}  // namespace dapple
