#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "dapple/schedule/schedule.h"

namespace dapple {
namespace {

using ::testing::HasSubstr;

std::vector<std::vector<int>> ReplicaPatterns(int S) {
  std::vector<std::vector<int>> out = {std::vector<int>(S, 1), std::vector<int>(S, 2)};
  std::vector<int> mixed(S);
  for (int s = 0; s < S; ++s) mixed[s] = 1 + (s * 7) % 4;  // 1, 4, 3, 2, 1, ...
  out.push_back(mixed);
  return out;
}

TEST(FindScheduleError, AcceptsEveryGeneratedSchedule) {
  int checked = 0;
  for (ScheduleKind kind : AllScheduleKinds()) {
    for (int S = 1; S <= 8; ++S) {
      for (int M = 1; M <= 16; ++M) {
        for (const auto& replicas : ReplicaPatterns(S)) {
          Schedule s = LowerComms(MakeSchedule(kind, S, M, VShaped(kind) ? 2 : 1), replicas);
          std::optional<std::string> err = FindScheduleError(s);
          EXPECT_FALSE(err.has_value())
              << ToString(kind) << " S=" << S << " M=" << M << ": " << *err;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(AllScheduleKinds().size()) * 8 * 16 * 3);
}

Schedule Text(const std::string& t) { return ParseScheduleText(t); }

TEST(FindScheduleError, DroppedReceiveIsUnmatchedSend) {
  Schedule s = LowerComms(MakeSchedule(ScheduleKind::kDappleA, 3, 4), {1, 1, 1});
  auto& p = s.programs[1];
  p.erase(std::find(p.begin(), p.end(), Instruction{Op::kRecvAct, 2}));
  std::optional<std::string> err = FindScheduleError(s);
  ASSERT_TRUE(err.has_value());
  EXPECT_THAT(*err, HasSubstr("stage 0"));
  EXPECT_THAT(*err, HasSubstr("SA2 (micro-batch 2)"));
  EXPECT_THAT(*err, HasSubstr("unmatched send, no RA2 on stage 1"));
}

TEST(FindScheduleError, DroppedGradientReceive) {
  Schedule s = LowerComms(MakeSchedule(ScheduleKind::kGPipe, 2, 2), {1, 1});
  auto& p = s.programs[0];
  p.erase(std::find(p.begin(), p.end(), Instruction{Op::kRecvGrad, 1}));
  std::optional<std::string> err = FindScheduleError(s);
  ASSERT_TRUE(err.has_value());
  EXPECT_THAT(*err,
              HasSubstr("stage 1 pc 7 SG1 (micro-batch 1): unmatched send, no RG1 on stage 0"));
}

TEST(FindScheduleError, SwappedOrderDeadlocks) {
  // GPipe's stage 0 with "F1 SA1" and "RG0 B0" swapped: stage 0 waits for the gradient of
  // micro-batch 0 while stage 1 waits for the activation of micro-batch 1.
  Schedule s = Text(
      "stage 0: F0 SA0 RG0 B0 F1 SA1 RG1 B1 STEP\n"
      "stage 1: RA0 F0 RA1 F1 B0 SG0 B1 SG1 STEP\n");
  std::optional<std::string> err = FindScheduleError(s);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(*err,
            "deadlock: stage 0 pc 2 RG0 (micro-batch 0) waits for stage 1; "
            "stage 1 pc 2 RA1 (micro-batch 1) waits for stage 0");
}

TEST(FindScheduleError, DeadlockInAThreeStageDapple) {
  // Stage 1 waits for the gradient of 0 before it forwards 1, while stage 2 (GPipe order)
  // wants activation 1 before it runs the backward of 0: a cycle through stages 1 and 2,
  // and stage 0 waits behind it.
  Schedule s = Text(
      "stage 0: F0 SA0 F1 SA1 RG0 B0 RG1 B1 STEP\n"
      "stage 1: RA0 F0 SA0 RG0 B0 SG0 RA1 F1 SA1 RG1 B1 SG1 STEP\n"
      "stage 2: RA0 F0 RA1 F1 B0 SG0 B1 SG1 STEP\n");
  std::optional<std::string> err = FindScheduleError(s);
  ASSERT_TRUE(err.has_value());
  EXPECT_THAT(*err, HasSubstr("deadlock"));
  EXPECT_THAT(*err, HasSubstr("stage 0 pc 4 RG0 (micro-batch 0) waits for stage 1"));
  EXPECT_THAT(*err, HasSubstr("stage 1 pc 3 RG0 (micro-batch 0) waits for stage 2"));
  EXPECT_THAT(*err, HasSubstr("stage 2 pc 2 RA1 (micro-batch 1) waits for stage 1"));
}

struct BadCase {
  const char* text;
  const char* message;
};

TEST(FindScheduleError, NamesEachKindOfMistake) {
  const BadCase cases[] = {
      {"stage 0: F0 F1 B0 STEP\n", "stage 0: micro-batch 1 has no backward (B1 or I1)"},
      {"stage 0: F0 I0 STEP\n", "stage 0: micro-batch 0 has no weight gradient (W0 after I0)"},
      {"stage 0: F0 B0 W0 STEP\n",
       "stage 0 pc 2 W0 (micro-batch 0): micro-batch 0 also has B at pc 1"},
      {"stage 0: F0 W0 I0 STEP\n",
       "stage 0 pc 1 W0 (micro-batch 0): weight gradient before its I (pc 2)"},
      {"stage 0: F0 I0 AR W0 STEP\n",
       "stage 0 pc 3 W0 (micro-batch 0): weight gradient after the AR at pc 2"},
      {"stage 0: F0 AR B0 STEP\n",
       "stage 0 pc 2 B0 (micro-batch 0): weight gradient after the AR at pc 1"},
      {"stage 0: I0 F0 W0 STEP\n",
       "stage 0 pc 0 I0 (micro-batch 0): backward before its forward (pc 1)"},
      {"stage 0: F0 SA0 RG0 I0 W0 STEP\nstage 1: RA0 F0 SG0 I0 W0 STEP\n",
       "stage 1 pc 2 SG0 (micro-batch 0): gradient sent before its backward"},
      {"stage 0: F0 B0 B1 STEP\n", "stage 0: micro-batch 1 has no forward (F1)"},
      {"stage 0: F0 F1 B0 B1 B0 STEP\n", "stage 0 pc 4 B0 (micro-batch 0): duplicate of pc 2"},
      {"stage 0: F0 B1 F1 B0 STEP\n",
       "stage 0 pc 1 B1 (micro-batch 1): backward before its forward (pc 2)"},
      {"stage 0: F0 B0 F1 B1\n", "stage 0: missing STEP at the end"},
      {"stage 0: F0 B0 STEP F1 B1\n", "stage 0 pc 3 F1 (micro-batch 1): instruction after STEP"},
      {"stage 0: F0 B0 AR AR STEP\n", "stage 0 pc 3 AR: duplicate AR"},
      {"stage 0: RA0 F0 B0 STEP\n",
       "stage 0 pc 0 RA0 (micro-batch 0): the first stage has no previous stage"},
      {"stage 0: F0 SA0 B0 STEP\n",
       "stage 0 pc 1 SA0 (micro-batch 0): the last stage has no next stage"},
      {"stage 0: F0 SA0 RG0 B0 STEP\nstage 1: F0 RA0 B0 SG0 STEP\n",
       "stage 1 pc 0 F0 (micro-batch 0): forward before its activation is received"},
      {"stage 0: SA0 F0 RG0 B0 STEP\nstage 1: RA0 F0 B0 SG0 STEP\n",
       "stage 0 pc 0 SA0 (micro-batch 0): activation sent before its forward"},
      {"stage 0: F0 SA0 RG0 B0 STEP\nstage 1: RA0 F0 SG0 B0 STEP\n",
       "stage 1 pc 2 SG0 (micro-batch 0): gradient sent before its backward"},
      {"stage 0: F0 SA0 B0 RG0 STEP\nstage 1: RA0 F0 B0 SG0 STEP\n",
       "stage 0 pc 2 B0 (micro-batch 0): backward before its gradient is received"},
      {"stage 0: F0 SA0 RG0 B0 STEP\nstage 1: F0 B0 SG0 STEP\n",
       "stage 0 pc 1 SA0 (micro-batch 0): unmatched send, no RA0 on stage 1"},
      {"stage 0: F0 B0 STEP\nstage 1: RA0 F0 B0 STEP\n",
       "stage 1 pc 0 RA0 (micro-batch 0): unmatched receive, no SA0 on stage 0"},
  };
  for (const BadCase& c : cases) {
    std::optional<std::string> err = FindScheduleError(Text(c.text));
    ASSERT_TRUE(err.has_value()) << c.text;
    EXPECT_EQ(*err, c.message) << c.text;
  }
}

TEST(FindScheduleError, MicroBatchOutOfRange) {
  Schedule s = Text("stage 0: F0 B0 F1 B1 STEP\n");
  s.num_micro_batches = 1;
  EXPECT_EQ(FindScheduleError(s).value_or(""),
            "stage 0 pc 2 F1 (micro-batch 1): micro-batch out of range [0, 1)");
  s.programs.push_back({});
  EXPECT_EQ(FindScheduleError(s).value_or(""), "schedule has 1 stages but 2 programs");
}

}  // namespace
}  // namespace dapple
