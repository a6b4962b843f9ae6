#include <gtest/gtest.h>

#include "dapple/common/error.h"
#include "dapple/schedule/schedule.h"

namespace dapple {
namespace {

TEST(WarmupDepth, Formulas) {
  EXPECT_EQ(WarmupDepth(ScheduleKind::kGPipe, 0, 4, 8), 8);
  EXPECT_EQ(WarmupDepth(ScheduleKind::kDappleA, 0, 4, 8), 4);
  EXPECT_EQ(WarmupDepth(ScheduleKind::kDappleA, 3, 4, 8), 1);
  EXPECT_EQ(WarmupDepth(ScheduleKind::kDappleA, 0, 4, 2), 2);
  EXPECT_EQ(WarmupDepth(ScheduleKind::kDappleB, 0, 4, 8), 7);
  EXPECT_EQ(WarmupDepth(ScheduleKind::kDappleB, 2, 4, 8), 3);
  EXPECT_EQ(WarmupDepth(ScheduleKind::kDappleB, 3, 4, 8), 1);
  EXPECT_EQ(WarmupDepth(ScheduleKind::kDappleB, 0, 4, 5), 5);
}

TEST(MakeSchedule, RejectsNonPositiveSizes) {
  EXPECT_THROW(MakeSchedule(ScheduleKind::kGPipe, 0, 4), InputError);
  EXPECT_THROW(MakeSchedule(ScheduleKind::kDappleA, 2, 0), InputError);
  EXPECT_THROW(MakeSchedule(ScheduleKind::kDappleB, -1, 1), InputError);
}

TEST(MakeSchedule, GPipeIsFillDrain) {
  Schedule s = MakeSchedule(ScheduleKind::kGPipe, 3, 4);
  ASSERT_EQ(s.programs.size(), 3u);
  for (const auto& p : s.programs) {
    ASSERT_EQ(p.size(), 8u);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(p[i], (Instruction{Op::kForward, i}));
      EXPECT_EQ(p[4 + i], (Instruction{Op::kBackward, i}));
    }
  }
}

// Forwards run in order 0..M-1, backwards in order 0..M-1, each exactly once; the number of
// forwards before the first backward is the warm-up depth, and after it the list strictly
// alternates B, F until the forwards run out.
TEST(MakeSchedule, ShapeOfEveryFamily) {
  for (ScheduleKind kind : AllScheduleKinds()) {
    if (SplitsBackward(kind)) continue;  // ZbH1ShapeAndDeferral
    for (int S = 1; S <= 8; ++S) {
      for (int M = 1; M <= 16; ++M) {
        Schedule s = MakeSchedule(kind, S, M);
        ASSERT_EQ(s.num_stages, S);
        ASSERT_EQ(s.num_micro_batches, M);
        for (int st = 0; st < S; ++st) {
          const auto& p = s.programs[st];
          ASSERT_EQ(static_cast<int>(p.size()), 2 * M);
          const int k = WarmupDepth(kind, st, S, M);
          int f = 0, b = 0, in_flight = 0, peak = 0;
          for (size_t i = 0; i < p.size(); ++i) {
            if (p[i].op == Op::kForward) {
              EXPECT_EQ(p[i].micro_batch, f++);
              peak = std::max(peak, ++in_flight);
            } else {
              ASSERT_EQ(p[i].op, Op::kBackward);
              EXPECT_EQ(p[i].micro_batch, b++);
              --in_flight;
            }
            if (static_cast<int>(i) >= k && f < M) {
              // After the warm-up: B at even offsets from k, F at odd ones.
              EXPECT_EQ(p[i].op, (i - k) % 2 == 0 ? Op::kBackward : Op::kForward)
                  << ToString(kind) << " S=" << S << " M=" << M << " stage " << st;
            }
          }
          EXPECT_EQ(f, M);
          EXPECT_EQ(b, M);
          EXPECT_EQ(peak, k);
        }
      }
    }
  }
}

TEST(LowerComms, AddsSendsReceivesAllReduceAndStep) {
  Schedule s = LowerComms(MakeSchedule(ScheduleKind::kDappleA, 2, 2), {2, 1});
  EXPECT_EQ(ScheduleToText(s),
            "stage 0: F0 SA0 F1 SA1 RG0 B0 RG1 B1 AR STEP\n"
            "stage 1: RA0 F0 B0 SG0 RA1 F1 B1 SG1 STEP\n");
}

TEST(LowerComms, SingleStageHasNoCommunication) {
  Schedule s = LowerComms(MakeSchedule(ScheduleKind::kGPipe, 1, 2), {3});
  EXPECT_EQ(ScheduleToText(s), "stage 0: F0 F1 B0 B1 AR STEP\n");
}

}  // namespace
}  // namespace dapple

namespace dapple {
namespace {

// zb-h1 (Note [ZB-H1]): with W removed, the order of F and I is dapple-a's with I for B;
// each W comes after its I, in micro-batch order, and stage s never has more than s W's
// pending right before an F; the peak in flight (F to W) is min(S, M).
TEST(MakeSchedule, ZbH1ShapeAndDeferral) {
  for (int S = 1; S <= 8; ++S) {
    for (int M = 1; M <= 16; ++M) {
      Schedule zb = MakeSchedule(ScheduleKind::kZbH1, S, M);
      Schedule a = MakeSchedule(ScheduleKind::kDappleA, S, M);
      for (int st = 0; st < S; ++st) {
        const auto& p = zb.programs[st];
        ASSERT_EQ(static_cast<int>(p.size()), 3 * M);
        std::vector<Instruction> no_w;
        int w = 0, in = 0, in_flight = 0, peak = 0;
        for (const Instruction& x : p) {
          if (x.op == Op::kWeightGrad) {
            EXPECT_EQ(x.micro_batch, w++);
            EXPECT_LT(x.micro_batch, in);
            --in_flight;
            continue;
          }
          if (x.op == Op::kInputGrad) ++in;
          if (x.op == Op::kForward) {
            EXPECT_LE(in - w, st) << "S=" << S << " M=" << M << " stage " << st;
            peak = std::max(peak, ++in_flight);
          }
          no_w.push_back({x.op == Op::kInputGrad ? Op::kBackward : x.op, x.micro_batch});
        }
        EXPECT_EQ(w, M);
        EXPECT_EQ(no_w, a.programs[st]) << "S=" << S << " M=" << M << " stage " << st;
        EXPECT_EQ(peak, std::min(S, M)) << "S=" << S << " M=" << M << " stage " << st;
        EXPECT_EQ(peak, PeakInFlight(ScheduleKind::kZbH1, st, S, M));
      }
    }
  }
}

TEST(LowerComms, WeightGradientHasNoCommunication) {
  Schedule s = LowerComms(MakeSchedule(ScheduleKind::kZbH1, 2, 2), {1, 2});
  EXPECT_EQ(ScheduleToText(s),
            "stage 0: F0 SA0 F1 SA1 RG0 I0 W0 RG1 I1 W1 STEP\n"
            "stage 1: RA0 F0 I0 SG0 RA1 F1 I1 SG1 W0 W1 AR STEP\n");
}

}  // namespace
}  // namespace dapple
