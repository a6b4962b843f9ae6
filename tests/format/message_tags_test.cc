// Message tags: the count against the largest tag enumerated by brute force, the 2^31
// boundary, and the one-line error naming the field.
#include "dapple/format/message_tags.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace dapple {
namespace {

TEST(MessageTags, CountIsOneMoreThanTheLargestTagAndTagsAreUnique) {
  for (int stages : {1, 2, 3, 5}) {
    for (int mbs : {1, 2, 7}) {
      for (int world : {1, 2, 5}) {
        std::set<int64_t> seen;
        int64_t largest = -1;
        for (int b = 0; b + 1 < stages; ++b)
          for (int dir : {0, 1})
            for (int mb = 0; mb < mbs; ++mb)
              for (int s = 0; s < world; ++s)
                for (int r = 0; r < world; ++r) {
                  int64_t t = MessageTag(b, dir, mb, s, r, mbs, world);
                  EXPECT_TRUE(seen.insert(t).second) << "duplicate tag " << t;
                  largest = std::max(largest, t);
                }
        EXPECT_EQ(MessageTagCount(stages, mbs, world), largest + 1)
            << stages << " stages, " << mbs << " micro-batches, " << world << " processes";
      }
    }
  }
}

Plan TwoStagePlan(int num_micro_batches) {
  Plan p;
  p.micro_batch_size = 1;
  p.num_micro_batches = num_micro_batches;
  p.global_batch_size = num_micro_batches;
  p.stages = {StagePlan{0, 0, "a", "a", {0}}, StagePlan{1, 1, "b", "b", {1}}};
  return p;
}

TEST(MessageTags, TheLimitIsTwoToThe31) {
  // 2 stages, 1024 micro-batches, 1024 processes: 2 x 1 x 2^10 x 2^20 = 2^31 tags, the
  // largest 2^31 - 1: just fits. One micro-batch more does not.
  EXPECT_EQ(MessageTagCount(2, 1024, 1024), kMessageTagLimit);
  EXPECT_FALSE(MessageTagError(TwoStagePlan(1024), 1024));
  auto why = MessageTagError(TwoStagePlan(1025), 1024);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("num_micro_batches"), std::string::npos) << *why;
  EXPECT_NE(why->find("2^31"), std::string::npos) << *why;
  // A large job: width 1024, 32 stages, 64 micro-batches.
  EXPECT_GT(MessageTagCount(32, 64, 1024), kMessageTagLimit);
  // Factors that overflow int64 saturate instead of wrapping.
  EXPECT_GT(MessageTagCount(1 << 30, 1 << 30, 1 << 30), kMessageTagLimit);
  EXPECT_EQ(MessageTagCount(1, 1 << 30, 1 << 30), 0);  // one stage sends nothing
}

}  // namespace
}  // namespace dapple
