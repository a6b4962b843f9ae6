// Core sets of emulated devices: the split, the list format, pinning a thread, the switch.
#include "dapple/common/core_sets.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <thread>

namespace dapple {
namespace {

TEST(CoreSets, SplitGivesEachProcessItsOwnCoresInOrder) {
  auto sets = SplitCores({0, 1, 2, 3, 4, 5}, 3, 2);
  ASSERT_TRUE(sets.has_value());
  EXPECT_EQ(*sets, (std::vector<CoreSet>{{0, 1}, {2, 3}, {4, 5}}));
  // Allowed cores need not be contiguous (a cpuset or taskset): the split follows them.
  sets = SplitCores({1, 3, 8}, 2, 1);
  ASSERT_TRUE(sets.has_value());
  EXPECT_EQ(*sets, (std::vector<CoreSet>{{1}, {3}}));
}

TEST(CoreSets, ProcessesThatWouldShareCoresStayUnpinned) {
  EXPECT_FALSE(SplitCores({0, 1}, 4, 1).has_value());
  EXPECT_FALSE(SplitCores({0, 1, 2}, 2, 2).has_value());
  EXPECT_FALSE(SplitCores({}, 1, 1).has_value());
}

TEST(CoreSets, FormatListsRanges) {
  EXPECT_EQ(FormatCores({0, 1, 2, 3, 6}), "0-3,6");
  EXPECT_EQ(FormatCores({5}), "5");
  EXPECT_EQ(FormatCores({0, 2, 4}), "0,2,4");
  EXPECT_EQ(FormatCores({}), "");
  EXPECT_EQ(FormatCoreSets({{0, 1}, {2, 3}}), "0-1 | 2-3");
}

TEST(CoreSets, PinnedThreadRunsOnlyOnItsCore) {
  CoreSet allowed = AllowedCores();
  ASSERT_FALSE(allowed.empty());
  CoreSet seen;
  bool pinned = false;
  std::thread t([&] {
    pinned = PinCallingThread({allowed.back()});
    seen = AllowedCores();
  });
  t.join();
  EXPECT_TRUE(pinned);
  EXPECT_EQ(seen, CoreSet{allowed.back()});
  EXPECT_EQ(AllowedCores(), allowed);  // the other threads keep theirs
}

TEST(CoreSets, EnvironmentTurnsPinningOff) {
  const char* before = std::getenv("DAPPLE_PIN_CORES");
  std::string saved = before ? before : "";
  setenv("DAPPLE_PIN_CORES", "0", 1);
  EXPECT_FALSE(CorePinningEnabled());
  EXPECT_FALSE(DeviceCoreSets(1, 1).has_value());
  setenv("DAPPLE_PIN_CORES", "1", 1);
  EXPECT_TRUE(CorePinningEnabled());
  EXPECT_TRUE(DeviceCoreSets(1, 1).has_value());
  if (before)
    setenv("DAPPLE_PIN_CORES", saved.c_str(), 1);
  else
    unsetenv("DAPPLE_PIN_CORES");
}

}  // namespace
}  // namespace dapple
