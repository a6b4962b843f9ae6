// The V-shape schedules (docs/schedules.md, "ZB-V", "V-Half and V-Min"): the lists against an
// independent statement of their contents, the V placement in the validator and the text form, and
// the chunk counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include "dapple/common/error.h"
#include "dapple/schedule/schedule.h"

namespace dapple {
namespace {

using ::testing::HasSubstr;

// Note [V placement]: chunk 0 of stage g is virtual stage g, chunk 1 is 2S - 1 - g, and
// every virtual stage maps back to its stage.
TEST(VShape, PlacesTheChunksInAV) {
  for (int S = 1; S <= 6; ++S) {
    Schedule s = MakeSchedule(ScheduleKind::kZbV, S, 2 * S, 2);
    ASSERT_TRUE(s.v_shape);
    std::set<int> seen;
    for (int g = 0; g < S; ++g) {
      EXPECT_EQ(s.VirtualStage(g, 0), g);
      EXPECT_EQ(s.VirtualStage(g, 1), 2 * S - 1 - g);
      for (int c : {0, 1}) {
        EXPECT_EQ(s.StageOf(s.VirtualStage(g, c)), g);
        seen.insert(s.VirtualStage(g, c));
      }
    }
    EXPECT_EQ(static_cast<int>(seen.size()), 2 * S);
  }
}

// Every stage runs F, I and W once for each (chunk, micro-batch), I after F and W after I;
// min(2(S - g) - 1, M) forwards of chunk 0 open stage g's list (the warm-up that fills the V).
TEST(VShape, EveryStageRunsEachChunkOnce) {
  for (int S = 1; S <= 8; ++S) {
    for (int M = 1; M <= 4 * S; ++M) {
      Schedule s = MakeSchedule(ScheduleKind::kZbV, S, M, 2);
      for (int g = 0; g < S; ++g) {
        const auto& p = s.programs[g];
        ASSERT_EQ(static_cast<int>(p.size()), 6 * M) << S << " " << M << " " << g;
        std::set<std::tuple<int, int, int>> done;  // (op, chunk, micro-batch)
        for (const Instruction& in : p) {
          const int op = static_cast<int>(in.op);
          ASSERT_TRUE(in.op == Op::kForward || in.op == Op::kInputGrad || in.op == Op::kWeightGrad);
          ASSERT_TRUE(done.insert({op, in.chunk, in.micro_batch}).second);
          if (in.op == Op::kInputGrad) {
            EXPECT_TRUE(done.count({static_cast<int>(Op::kForward), in.chunk, in.micro_batch}));
          }
          if (in.op == Op::kWeightGrad) {
            EXPECT_TRUE(done.count({static_cast<int>(Op::kInputGrad), in.chunk, in.micro_batch}));
          }
        }
        const int warm = std::min(2 * (S - g) - 1, M);
        for (int k = 0; k < warm; ++k)
          EXPECT_EQ(p[k], (Instruction{Op::kForward, k, 0})) << S << " " << M << " " << g;
        EXPECT_EQ(WarmupDepth(ScheduleKind::kZbV, g, S, M), warm);
      }
    }
  }
}

// v-half and v-min (Note [V-Half and V-Min]): every stage runs F, I and W once for each
// (chunk, micro-batch), I after F and W after I, the F's and I's of a chunk in micro-batch
// order; the lowered lists are sound with replicas; no stage holds more than its cap of
// chunk-micro-batches, 2((S + 2) / 2) and 2((S + 4) / 3), for any M.
TEST(ControlledV, ListsAreSoundAndWithinTheirCaps) {
  for (ScheduleKind kind : {ScheduleKind::kVHalf, ScheduleKind::kVMin}) {
    for (int S = 1; S <= 8; ++S) {
      const int cap = kind == ScheduleKind::kVHalf ? 2 * ((S + 2) / 2) : 2 * ((S + 4) / 3);
      for (int M = 1; M <= 4 * S; ++M) {
        const std::string at =
            ToString(kind) + " S=" + std::to_string(S) + " M=" + std::to_string(M);
        Schedule s = MakeSchedule(kind, S, M, 2);
        ASSERT_TRUE(s.v_shape);
        for (int g = 0; g < S; ++g) {
          std::set<std::tuple<int, int, int>> done;  // (op, chunk, micro-batch)
          int next[2][2] = {{0, 0}, {0, 0}};         // [F or I][chunk]: next micro-batch
          int held = 0, peak = 0;
          for (const Instruction& in : s.programs[g]) {
            const int op = static_cast<int>(in.op);
            ASSERT_TRUE(done.insert({op, in.chunk, in.micro_batch}).second) << at;
            if (in.op == Op::kForward) {
              ASSERT_EQ(in.micro_batch, next[0][in.chunk]++) << at;
              peak = std::max(peak, ++held);
            } else if (in.op == Op::kInputGrad) {
              ASSERT_EQ(in.micro_batch, next[1][in.chunk]++) << at;
              ASSERT_TRUE(done.count({static_cast<int>(Op::kForward), in.chunk, in.micro_batch}));
            } else {
              ASSERT_EQ(in.op, Op::kWeightGrad) << at;
              ASSERT_TRUE(done.count({static_cast<int>(Op::kInputGrad), in.chunk, in.micro_batch}));
              --held;
            }
          }
          ASSERT_EQ(static_cast<int>(s.programs[g].size()), 6 * M) << at << " stage " << g;
          ASSERT_LE(peak, cap) << at << " stage " << g;
          ASSERT_EQ(PeakInFlight(kind, g, S, M), peak) << at << " stage " << g;
        }
        std::vector<int> replicas(S);
        for (int g = 0; g < S; ++g) replicas[g] = 1 + g % 2;
        ASSERT_EQ(FindScheduleError(LowerComms(s, replicas)), std::nullopt) << at;
      }
    }
  }
  EXPECT_EQ(ParseScheduleKind("v-half"), ScheduleKind::kVHalf);
  EXPECT_EQ(ParseScheduleKind("v-min"), ScheduleKind::kVMin);
  EXPECT_TRUE(VShaped(ScheduleKind::kVMin) && SplitsBackward(ScheduleKind::kVHalf));
}

// The same lists placed in a loop (chunk 1 of g as virtual stage S + g) are unsound: the V
// placement is what makes them run.
TEST(VShape, TheValidatorUsesThePlacement) {
  Schedule s = LowerComms(MakeSchedule(ScheduleKind::kZbV, 3, 6, 2), {1, 1, 1});
  EXPECT_EQ(FindScheduleError(s), std::nullopt);
  s.v_shape = false;
  ASSERT_TRUE(FindScheduleError(s).has_value());
  // A text without the placement line is read as looped.
  std::string text = ScheduleToText(s);
  EXPECT_EQ(text.find("placement"), std::string::npos);
  s.v_shape = true;
  text = ScheduleToText(s);
  EXPECT_EQ(text.substr(0, 13), "placement: v\n");
  EXPECT_TRUE(ParseScheduleText(text).v_shape);
  EXPECT_FALSE(ParseScheduleText(text.substr(13)).v_shape);
  EXPECT_TRUE(FindScheduleError(ParseScheduleText(text.substr(13))).has_value());
  Schedule three = ParseScheduleText("placement: v\nstage 0: F0 F0c1 F0c2 STEP\n");
  EXPECT_THAT(FindScheduleError(three).value_or("sound"), HasSubstr("in a V has 3 chunks"));
}

TEST(VShape, RunsTwoChunksOnly) {
  auto error = [](int chunks) -> std::string {
    try {
      MakeSchedule(ScheduleKind::kZbV, 4, 8, chunks);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error(1),
            "virtual_stages: schedule 'zb-v' runs 2 chunks per device group (a V), not 1");
  EXPECT_EQ(error(3),
            "virtual_stages: schedule 'zb-v' runs 2 chunks per device group (a V), not 3");
  EXPECT_EQ(error(2), "no error");
  EXPECT_EQ(ParseScheduleKind("zb-v"), ScheduleKind::kZbV);
  EXPECT_TRUE(SplitsBackward(ScheduleKind::kZbV));
}

}  // namespace
}  // namespace dapple
