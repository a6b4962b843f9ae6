// Origin's name (as plans and `dapple plan --json` spell who proposed a plan) and its fields,
// by which SelectStarts tells its starts apart.
#include "dapple/plan/search/origin.h"

#include <gtest/gtest.h>

#include <map>

#include "dapple/plan/refine/refine.h"

namespace dapple {
namespace {

TEST(Origin, NamesAreTheProposersWithWhatTheStartsAdded) {
  EXPECT_EQ(Origin("dapple-dp").Name(), "dapple-dp");
  EXPECT_EQ(KindFirstOrigin(0).Name(), "even-widths-A-first");
  EXPECT_EQ(KindFirstOrigin(1).Name(), "even-widths-B-first");
  Origin dp("dp");
  dp.recompute = true;
  EXPECT_EQ(dp.Name(), "dp+recompute");
  Origin loose = KindFirstOrigin(1);
  loose.shard = true;
  EXPECT_EQ(loose.Name(), "even-widths-B-first+shard");
  EXPECT_NE(loose, KindFirstOrigin(1));
}

// The even-width origins in id order and in each server order are distinct groups, and a
// re-computing variant is a group of its own.
TEST(Origin, VariantsAndOrdersAreDistinctGroups) {
  std::map<Origin, int> groups;
  Origin recomputing(kEvenWidthsOrigin);
  recomputing.recompute = true;
  for (const Origin& o : {Origin(kEvenWidthsOrigin), KindFirstOrigin(0), KindFirstOrigin(1),
                          recomputing, Origin(kEvenWidthsOrigin), KindFirstOrigin(0)})
    ++groups[o];
  EXPECT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[Origin(kEvenWidthsOrigin)], 2);
  EXPECT_EQ(groups[KindFirstOrigin(0)], 2);
}

}  // namespace
}  // namespace dapple
