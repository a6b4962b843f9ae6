// Interleaved 1F1B (docs/schedules.md, "Interleaved 1F1B"): the generator's lists, the
// chunk in the text form, the validator's chunk checks and the bad chunk counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "dapple/common/error.h"
#include "dapple/schedule/schedule.h"

namespace dapple {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(auto&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// With one chunk, interleaved is dapple-b's list, whatever S and M.
TEST(Interleaved, OneChunkIsDappleB) {
  for (int S = 1; S <= 6; ++S)
    for (int M = 1; M <= 12; ++M)
      EXPECT_EQ(MakeSchedule(ScheduleKind::kInterleaved, S, M, 1).programs,
                MakeSchedule(ScheduleKind::kDappleB, S, M).programs)
          << S << " " << M;
}

// Every (chunk, micro-batch) is forwarded and backwarded once on every stage; forwards run
// in groups of S micro-batches, chunk 0 to v-1, backwards likewise with the chunks reversed;
// K_s = min((v-1)S + 2(S-s) - 1, vM) forwards precede the first backward, after which B and F
// alternate until the forwards run out; the peak of chunk-micro-batches in flight is K_s
// (PeakInFlight). Checked against this independent statement of the order.
TEST(Interleaved, OrderWarmupAndPeak) {
  for (int S = 2; S <= 6; ++S) {
    for (int v : {2, 3, 4}) {
      for (int M = S; M <= 4 * S; M += S) {
        Schedule s = MakeSchedule(ScheduleKind::kInterleaved, S, M, v);
        ASSERT_EQ(s.num_chunks, v);
        // The k-th forward: group k / (vS) of S micro-batches, chunk (k % vS) / S.
        std::vector<std::pair<int, int>> order;  // (micro-batch, chunk)
        for (int g = 0; g < M / S; ++g)
          for (int c = 0; c < v; ++c)
            for (int i = 0; i < S; ++i) order.push_back({g * S + i, c});
        for (int st = 0; st < S; ++st) {
          const auto& p = s.programs[st];
          ASSERT_EQ(static_cast<int>(p.size()), 2 * v * M);
          const int k = std::min((v - 1) * S + 2 * (S - st) - 1, v * M);
          EXPECT_EQ(PeakInFlight(ScheduleKind::kInterleaved, st, S, M, v), k);
          int f = 0, b = 0, in_flight = 0, peak = 0;
          for (size_t i = 0; i < p.size(); ++i) {
            if (p[i].op == Op::kForward) {
              EXPECT_EQ(std::make_pair(p[i].micro_batch, p[i].chunk), order[f]) << i;
              ++f;
              peak = std::max(peak, ++in_flight);
            } else {
              ASSERT_EQ(p[i].op, Op::kBackward);
              EXPECT_EQ(p[i].micro_batch, order[b].first);
              EXPECT_EQ(p[i].chunk, v - 1 - order[b].second);
              ++b;
              --in_flight;
            }
            if (static_cast<int>(i) >= k && f < v * M) {  // B F B F ... after the warm-up
              EXPECT_EQ(p[i].op, (i - k) % 2 == 0 ? Op::kBackward : Op::kForward) << i;
            }
          }
          EXPECT_EQ(peak, k);
        }
      }
    }
  }
}

// Lowered with any replication, every interleaved list is sound (the dry run finds no
// deadlock), and the communication goes round: the last group sends to the first.
TEST(Interleaved, LoweredListsAreSound) {
  int checked = 0;
  for (int S = 2; S <= 6; ++S)
    for (int v : {2, 3, 4})
      for (int M = S; M <= 3 * S; M += S)
        for (int r : {1, 2}) {
          Schedule s =
              LowerComms(MakeSchedule(ScheduleKind::kInterleaved, S, M, v), std::vector<int>(S, r));
          ASSERT_EQ(FindScheduleError(s), std::nullopt) << S << " " << v << " " << M;
          ++checked;
        }
  EXPECT_EQ(checked, 5 * 3 * 3 * 2);
  Schedule s = LowerComms(MakeSchedule(ScheduleKind::kInterleaved, 2, 2, 2), {1, 1});
  // Stage 1 chunk 0 (virtual stage 1) sends to stage 0 chunk 1 (virtual stage 2), which
  // receives it; the first virtual stage receives nothing, the last sends nothing onwards.
  EXPECT_EQ(ScheduleToText(s),
            "stage 0: F0 SA0 F1 SA1 RA0c1 F0c1 SA0c1 RA1c1 F1c1 SA1c1 RG0c1 B0c1 SG0c1 RG1c1 "
            "B1c1 SG1c1 RG0 B0 RG1 B1 STEP\n"
            "stage 1: RA0 F0 SA0 RA1 F1 SA1 RA0c1 F0c1 B0c1 SG0c1 RA1c1 F1c1 B1c1 SG1c1 RG0 B0 "
            "SG0 RG1 B1 SG1 STEP\n");
}

TEST(Interleaved, TextFormCarriesTheChunk) {
  EXPECT_EQ(ParseInstruction("F3c1"), (Instruction{Op::kForward, 3, 1}));
  EXPECT_EQ(ParseInstruction("SG12c3"), (Instruction{Op::kSendGrad, 12, 3}));
  EXPECT_EQ(ToString(Instruction{Op::kRecvAct, 2, 4}), "RA2c4");
  EXPECT_EQ(ToString(Instruction{Op::kRecvAct, 2, 0}), "RA2");
  for (const char* bad : {"F3c", "F3c-1", "F3x1", "Fc1", "F3c1c2", "F3 c1", "ARc1"})
    EXPECT_EQ(ParseInstruction(bad), std::nullopt) << bad;
  for (int S : {2, 3}) {
    Schedule s =
        LowerComms(MakeSchedule(ScheduleKind::kInterleaved, S, 2 * S, 3), std::vector<int>(S, 2));
    Schedule back = ParseScheduleText(ScheduleToText(s));
    EXPECT_EQ(back.num_chunks, 3);
    EXPECT_EQ(back.num_micro_batches, 2 * S);
    EXPECT_EQ(back.programs, s.programs);
  }
}

TEST(Interleaved, ValidatorNamesChunkProblems) {
  auto error = [](const std::string& text) {
    return FindScheduleError(ParseScheduleText(text)).value_or("sound");
  };
  // Sound: two stages, two chunks, one micro-batch (M a multiple of S is the generator's
  // need; the validator checks any list).
  const std::string ok =
      "stage 0: F0 SA0 RA0c1 F0c1 SA0c1 RG0c1 B0c1 SG0c1 RG0 B0 STEP\n"
      "stage 1: RA0 F0 SA0 RA0c1 F0c1 B0c1 SG0c1 RG0 B0 SG0 STEP\n";
  EXPECT_EQ(error(ok), "sound");
  // A chunk's forward without its chunk-1 backward.
  EXPECT_THAT(error("stage 0: F0 SA0 RA0c1 F0c1 SA0c1 RG0c1 B0c1 SG0c1 RG0 B0 STEP\n"
                    "stage 1: RA0 F0 SA0 RA0c1 F0c1 SG0c1 RG0 B0 SG0 STEP\n"),
              HasSubstr("stage 1: micro-batch 0 on chunk 1 has no backward (B0c1 or I0c1)"));
  // Chunk 1's backward after chunk 0's on the same stage.
  EXPECT_THAT(error("stage 0: F0 SA0 RA0c1 F0c1 SA0c1 RG0 B0 RG0c1 B0c1 SG0c1 STEP\n"
                    "stage 1: RA0 F0 SA0 RA0c1 F0c1 B0c1 SG0c1 RG0 B0 SG0 STEP\n"),
              HasSubstr("stage 0 pc 6 B0 (micro-batch 0): backward before chunk 1's backward"));
  // The first virtual stage has no previous stage; chunk 1 of stage 0 does (stage 1).
  EXPECT_THAT(error("stage 0: RA0 F0 STEP\nstage 1: F0 B0 STEP\n"),
              HasSubstr("the first stage has no previous stage"));
  // A send across the wrap-around with no receive.
  EXPECT_THAT(
      error("stage 0: F0 SA0 F0c1 SA0c1 RG0c1 B0c1 SG0c1 RG0 B0 STEP\n"
            "stage 1: RA0 F0 SA0 RA0c1 F0c1 B0c1 SG0c1 RG0 B0 SG0 STEP\n"),
      HasSubstr("stage 1 pc 2 SA0 (micro-batch 0): unmatched send, no RA0 on stage 0 chunk 1"));
  // Receives waiting on each other round the ring: a deadlock.
  EXPECT_THAT(error("stage 0: F0 SA0 RG0c1 RA0c1 F0c1 SA0c1 B0c1 SG0c1 RG0 B0 STEP\n"
                    "stage 1: RA0 F0 SA0 RA0c1 F0c1 B0c1 SG0c1 RG0 B0 SG0 STEP\n"),
              HasSubstr("deadlock: stage 0 pc 2 RG0c1 (micro-batch 0, chunk 1) waits for stage 1; "
                        "stage 1 pc 3 RA0c1 (micro-batch 0, chunk 1) waits for stage 0"));
  EXPECT_THAT(error("stage 0: F0 SA0 RG0 RA0c1 F0c1 SA0c1 RG0c1 B0c1 SG0c1 B0 STEP\n"
                    "stage 1: RA0 F0 SA0 RA0c1 F0c1 B0c1 SG0c1 RG0 B0 SG0 STEP\n"),
              HasSubstr("deadlock: stage 0 pc 2 RG0 (micro-batch 0) waits for stage 1; stage 1 "
                        "pc 3 RA0c1 (micro-batch 0, chunk 1) waits for stage 0"));
}

TEST(Interleaved, BadChunkCountsAreInputErrors) {
  auto make = [](ScheduleKind k, int S, int M, int v) {
    return ErrorOf([&] { MakeSchedule(k, S, M, v); });
  };
  EXPECT_THAT(make(ScheduleKind::kInterleaved, 4, 8, 0), HasSubstr("virtual_stages: must be"));
  EXPECT_THAT(make(ScheduleKind::kDappleA, 4, 8, 2),
              HasSubstr("virtual_stages: 2 chunks per stage need schedule 'interleaved'"));
  EXPECT_THAT(make(ScheduleKind::kInterleaved, 1, 8, 2), HasSubstr("at least 2 stages"));
  EXPECT_EQ(make(ScheduleKind::kInterleaved, 4, 2, 2),
            "num_micro_batches: 2 micro-batches are fewer than the 4 stages: interleaved 1F1B "
            "needs at least one micro-batch per stage (and a multiple of 4)");
  EXPECT_THAT(make(ScheduleKind::kInterleaved, 4, 6, 2),
              HasSubstr("num_micro_batches: 6 is not a multiple of the 4 stages"));
  EXPECT_EQ(make(ScheduleKind::kInterleaved, 4, 8, 2), "no error");
}

}  // namespace
}  // namespace dapple
