#include "dapple/schedule/instruction.h"

#include <gtest/gtest.h>

namespace dapple {
namespace {

TEST(Instruction, TextForms) {
  EXPECT_EQ(ToString({Op::kForward, 3}), "F3");
  EXPECT_EQ(ToString({Op::kBackward, 12}), "B12");
  EXPECT_EQ(ToString({Op::kInputGrad, 5}), "I5");
  EXPECT_EQ(ToString({Op::kWeightGrad, 6}), "W6");
  EXPECT_EQ(ToString({Op::kSendAct, 0}), "SA0");
  EXPECT_EQ(ToString({Op::kRecvAct, 1}), "RA1");
  EXPECT_EQ(ToString({Op::kSendGrad, 2}), "SG2");
  EXPECT_EQ(ToString({Op::kRecvGrad, 4}), "RG4");
  EXPECT_EQ(ToString({Op::kAllReduceGrads, -1}), "AR");
  EXPECT_EQ(ToString({Op::kOptimizerStep, -1}), "STEP");
}

TEST(Instruction, RoundTripsEveryOp) {
  for (Op op : {Op::kForward, Op::kBackward, Op::kInputGrad, Op::kWeightGrad, Op::kSendAct,
                Op::kRecvAct, Op::kSendGrad, Op::kRecvGrad}) {
    for (int mb : {0, 7, 123}) {
      Instruction in{op, mb};
      std::optional<Instruction> back = ParseInstruction(ToString(in));
      ASSERT_TRUE(back.has_value()) << ToString(in);
      EXPECT_EQ(*back, in);
    }
  }
  EXPECT_EQ(ParseInstruction("AR"), (Instruction{Op::kAllReduceGrads, -1}));
  EXPECT_EQ(ParseInstruction("STEP"), (Instruction{Op::kOptimizerStep, -1}));
}

TEST(Instruction, RejectsMalformed) {
  for (const char* bad : {"", "F", "B-1", "F+1", "X3", "SA", "S3", "F3x", "AR1", "STEP0", "f3", "I",
                          "W-2", "w3", " F3", "RA 3", "F99999999999"}) {
    EXPECT_FALSE(ParseInstruction(bad).has_value()) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace dapple
