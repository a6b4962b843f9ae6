#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "dapple/common/error.h"
#include "dapple/schedule/schedule.h"

namespace dapple {
namespace {

using ::testing::HasSubstr;

std::string ReadGolden(const std::string& name) {
  std::ifstream in(std::string(DAPPLE_SOURCE_DIR) + "/tests/golden/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Golden files: the generators' output, checked by hand once (docs/schedules.md).
struct Golden {
  const char* file;
  ScheduleKind kind;
  int stages, micro_batches;
  std::vector<int> replicas;  // empty: compute-only
  int chunks = 1;
};

TEST(ScheduleText, MatchesGoldenFiles) {
  const Golden goldens[] = {
      {"gpipe_s4_m8.txt", ScheduleKind::kGPipe, 4, 8, {}},
      {"dapple_a_s4_m8.txt", ScheduleKind::kDappleA, 4, 8, {}},
      {"dapple_b_s4_m8.txt", ScheduleKind::kDappleB, 4, 8, {}},
      {"dapple_a_s3_m2.txt", ScheduleKind::kDappleA, 3, 2, {}},
      {"dapple_a_s3_m4_lowered_r2_1_3.txt", ScheduleKind::kDappleA, 3, 4, {2, 1, 3}},
      {"dapple_b_s3_m5_lowered.txt", ScheduleKind::kDappleB, 3, 5, {1, 1, 1}},
      {"zb_h1_s4_m8.txt", ScheduleKind::kZbH1, 4, 8, {}},
      {"zb_h1_s4_m2.txt", ScheduleKind::kZbH1, 4, 2, {}},
      {"zb_h1_s3_m4_lowered_r2_1_3.txt", ScheduleKind::kZbH1, 3, 4, {2, 1, 3}},
      {"interleaved_s4_m8_v2.txt", ScheduleKind::kInterleaved, 4, 8, {}, 2},
      {"interleaved_s3_m3_v2_lowered_r2_1_3.txt", ScheduleKind::kInterleaved, 3, 3, {2, 1, 3}, 2},
      {"zb_v_s4_m8.txt", ScheduleKind::kZbV, 4, 8, {}, 2},
      {"zb_v_s3_m2.txt", ScheduleKind::kZbV, 3, 2, {}, 2},
      {"zb_v_s2_m4_lowered_r1_2.txt", ScheduleKind::kZbV, 2, 4, {1, 2}, 2},
      {"zb_h2_s4_m8.txt", ScheduleKind::kZbH2, 4, 8, {}},
      {"v_half_s4_m8.txt", ScheduleKind::kVHalf, 4, 8, {}, 2},
      {"v_min_s4_m8.txt", ScheduleKind::kVMin, 4, 8, {}, 2},
      {"v_min_s3_m2.txt", ScheduleKind::kVMin, 3, 2, {}, 2},
      {"v_half_s2_m3_lowered_r1_2.txt", ScheduleKind::kVHalf, 2, 3, {1, 2}, 2},
  };
  for (const Golden& g : goldens) {
    Schedule made = MakeSchedule(g.kind, g.stages, g.micro_batches, g.chunks);
    if (!g.replicas.empty()) made = LowerComms(made, g.replicas);
    Schedule read = ParseScheduleText(ReadGolden(g.file));
    EXPECT_EQ(read.num_stages, g.stages) << g.file;
    EXPECT_EQ(read.num_micro_batches, g.micro_batches) << g.file;
    EXPECT_EQ(read.num_chunks, g.chunks) << g.file;
    EXPECT_EQ(read.v_shape, VShaped(g.kind)) << g.file;
    EXPECT_EQ(read.programs, made.programs) << g.file << " generated:\n" << ScheduleToText(made);
  }
}

TEST(ScheduleText, RoundTrips) {
  for (ScheduleKind kind : AllScheduleKinds()) {
    for (int S : {1, 2, 5}) {
      for (int M : {1, 3, 8}) {
        Schedule s =
            LowerComms(MakeSchedule(kind, S, M, VShaped(kind) ? 2 : 1), std::vector<int>(S, 2));
        std::string text = ScheduleToText(s);
        Schedule back = ParseScheduleText(text);
        EXPECT_EQ(back.num_stages, S);
        EXPECT_EQ(back.num_micro_batches, M);
        EXPECT_EQ(back.programs, s.programs);
        EXPECT_EQ(back.v_shape, s.v_shape);
        EXPECT_EQ(ScheduleToText(back), text);
      }
    }
  }
}

TEST(ScheduleText, SkipsCommentsAndBlankLinesAndCarriageReturns) {
  Schedule s = ParseScheduleText("# a comment\n\nstage 0: F0 B0 STEP\r\n  # more\nstage 1:\n");
  EXPECT_EQ(s.num_stages, 2);
  EXPECT_EQ(s.num_micro_batches, 1);
  EXPECT_EQ(s.programs[0].size(), 3u);
  EXPECT_TRUE(s.programs[1].empty());
}

TEST(ScheduleText, ErrorsNameTheLine) {
  auto message = [](const std::string& text) -> std::string {
    try {
      ParseScheduleText(text);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(
      message("stage 0: F0 B0\nstage 1: F0 X1\n"),
      "schedule text line 2: 'X1' is not an instruction (F3 B3 I3 W3 SA3 RA3 SG3 RG3 AR STEP, "
      "F3c1 on chunk 1)");
  EXPECT_THAT(message("stage 0: F0\nstage 2: F0\n"), HasSubstr("line 2: expected 'stage 1:'"));
  EXPECT_THAT(message("stages 0: F0\n"), HasSubstr("line 1"));
  EXPECT_THAT(message("stage 0 F0\n"), HasSubstr("line 1"));
  EXPECT_EQ(message("# nothing\n"), "schedule text: no 'stage 0:' line");
}

}  // namespace
}  // namespace dapple
