#include "dapple/common/json_util.h"

#include <gtest/gtest.h>

#include "dapple/common/error.h"
#include "dapple/common/schedule_kind.h"

namespace dapple {
namespace {

TEST(JsonField, MissingFieldNamesPath) {
  Json j = Json::parse(R"({"a": {"b": 1}})");
  JsonField root(j, "f.json");
  EXPECT_EQ(root["a"]["b"].Int(), 1);
  try {
    root["a"]["c"].Int();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "f.json.a.c: missing");
  }
}

TEST(JsonField, NegativeRejected) {
  Json j = Json::parse(R"({"x": -1, "y": 1.5})");
  JsonField root(j, "f.json");
  EXPECT_THROW(root["x"].NonNegative(), InputError);
  EXPECT_THROW(root["y"].Int(), InputError);
  EXPECT_DOUBLE_EQ(root["y"].Positive(), 1.5);
}

TEST(ScheduleKind, RoundTrip) {
  for (ScheduleKind k : AllScheduleKinds()) EXPECT_EQ(ParseScheduleKind(ToString(k)), k);
  EXPECT_THROW(ParseScheduleKind("pipedream"), InputError);
}

}  // namespace
}  // namespace dapple
