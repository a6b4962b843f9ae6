// SimCache's lowered lists made from the same shape's other lists (Note [Lists with and without
// AR]) against the lists made anew, on random shapes of every schedule.
#include "dapple/plan/search/lowered_lists.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "dapple/common/error.h"

namespace dapple {
namespace {

void ExpectSameFacts(const ListFacts& a, const ListFacts& b, const std::string& at) {
  EXPECT_EQ(a.count, b.count) << at;
  EXPECT_EQ(a.steps, b.steps) << at;
  EXPECT_EQ(a.allreduces, b.allreduces) << at;
  EXPECT_EQ(a.last_backward_pc, b.last_backward_pc) << at;
  EXPECT_EQ(a.last_backward_mb, b.last_backward_mb) << at;
  EXPECT_EQ(a.last_recv_grad_pc, b.last_recv_grad_pc) << at;
  EXPECT_EQ(a.last_recv_grad_mb, b.last_recv_grad_mb) << at;
  EXPECT_EQ(a.last_send_grad_pc, b.last_send_grad_pc) << at;
  EXPECT_EQ(a.last_send_grad_mb, b.last_send_grad_mb) << at;
  EXPECT_EQ(a.last_weight_grads_pc, b.last_weight_grads_pc) << at;
  EXPECT_EQ(a.last_compute_pc, b.last_compute_pc) << at;
  EXPECT_EQ(a.last_recv_pc, b.last_recv_pc) << at;
  EXPECT_EQ(a.last_allreduce_pc, b.last_allreduce_pc) << at;
}

TEST(LoweredLists, FromTheOtherSideAreTheListsMadeAnew) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> kinds(0, static_cast<int>(ScheduleKind::kZbH2));
  std::uniform_int_distribution<int> stages(1, 9), micro_batches(1, 40), chunks(1, 3);
  int compared = 0;
  for (int i = 0; i < 300; ++i) {
    const auto kind = static_cast<ScheduleKind>(kinds(rng));
    const int S = stages(rng), M = micro_batches(rng);
    const int v = VShaped(kind) ? 2 : kind == ScheduleKind::kInterleaved ? chunks(rng) : 1;
    const std::string at = ToString(kind) + " S=" + std::to_string(S) + " M=" + std::to_string(M) +
                           " v=" + std::to_string(v);
    LoweredLists without, with;
    try {
      without = LowerLists(kind, S, M, v, false);
      with = LowerLists(kind, S, M, v, true);
    } catch (const Error&) {
      continue;  // a shape the schedule does not take (chunks against S and M)
    }
    for (bool with_allreduce : {false, true}) {
      const LoweredLists& made = with_allreduce ? with : without;
      const LoweredLists from = LowerListsFrom(with_allreduce ? without : with, with_allreduce);
      ASSERT_EQ(from.schedule.programs, made.schedule.programs) << at;
      EXPECT_EQ(from.schedule.num_stages, made.schedule.num_stages) << at;
      EXPECT_EQ(from.schedule.num_micro_batches, made.schedule.num_micro_batches) << at;
      EXPECT_EQ(from.schedule.num_chunks, made.schedule.num_chunks) << at;
      EXPECT_EQ(from.schedule.v_shape, made.schedule.v_shape) << at;
      ASSERT_EQ(from.facts.size(), made.facts.size()) << at;
      for (size_t s = 0; s < made.facts.size(); ++s)
        ExpectSameFacts(from.facts[s], made.facts[s], at + " stage " + std::to_string(s));
    }
    ++compared;
  }
  EXPECT_GT(compared, 200);
}

}  // namespace
}  // namespace dapple
