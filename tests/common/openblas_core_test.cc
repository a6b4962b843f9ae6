#include "dapple/common/openblas_core.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace dapple {
namespace {

TEST(OpenBlasCore, IntelByFlags) {
  EXPECT_EQ(OpenBlasCoreTypeFor("vendor_id\t: GenuineIntel\nflags\t\t: fpu sse avx2 avx512f\n"),
            "SkylakeX");
  EXPECT_EQ(OpenBlasCoreTypeFor("vendor_id\t: GenuineIntel\nflags\t\t: fpu avx avx2 fma\n"),
            "Haswell");
  EXPECT_EQ(OpenBlasCoreTypeFor("model name\t: X\nflags\t\t: fpu sse avx2 avx512f avx512bw\n"),
            "SkylakeX")
      << "no vendor line: by the flags";
}

// scripts/bench_openblas_core.sh: on an AMD EPYC with avx512f the AVX2 kernels were faster.
TEST(OpenBlasCore, AmdGetsTheAvx2KernelsEvenWithAvx512) {
  EXPECT_EQ(OpenBlasCoreTypeFor("vendor_id\t: AuthenticAMD\nflags\t\t: fpu avx2 avx512f\n"),
            "Haswell");
  EXPECT_EQ(OpenBlasCoreTypeFor("vendor_id\t: AuthenticAMD\nflags\t\t: fpu avx avx2\n"), "Haswell");
  EXPECT_EQ(OpenBlasCoreTypeFor("vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse avx\n"), "");
}

TEST(OpenBlasCore, NothingWithoutTheFlags) {
  EXPECT_EQ(OpenBlasCoreTypeFor("flags\t\t: fpu sse avx avx512fx avx2x\n"), "") << "whole words";
  EXPECT_EQ(OpenBlasCoreTypeFor("vendor_id\t: GenuineIntel\n"), "");
  EXPECT_EQ(OpenBlasCoreTypeFor(""), "");
  // Only the first flags line counts (every core lists the same).
  EXPECT_EQ(OpenBlasCoreTypeFor("flags\t\t: fpu\nflags\t\t: avx2\n"), "");
}

TEST(OpenBlasCore, ThisCpuAgreesWithItsCpuinfo) {
  const std::string t = OpenBlasCoreTypeForThisCpu();
  EXPECT_TRUE(t.empty() || t == "Haswell" || t == "SkylakeX") << t;
}

// Unset: this CPU's type (or still unset when it has none). Set, even empty: left alone.
TEST(OpenBlasCore, SetIfUnsetKeepsAChoiceMade) {
  const char* before = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = before ? before : "";
  unsetenv("OPENBLAS_CORETYPE");
  SetOpenBlasCoreTypeIfUnset();
  const char* now = std::getenv("OPENBLAS_CORETYPE");
  EXPECT_EQ(now ? std::string(now) : "", OpenBlasCoreTypeForThisCpu());
  setenv("OPENBLAS_CORETYPE", "Zen", 1);
  SetOpenBlasCoreTypeIfUnset();
  EXPECT_STREQ(std::getenv("OPENBLAS_CORETYPE"), "Zen");
  setenv("OPENBLAS_CORETYPE", "", 1);
  SetOpenBlasCoreTypeIfUnset();
  EXPECT_STREQ(std::getenv("OPENBLAS_CORETYPE"), "");
  if (before) {
    setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  } else {
    unsetenv("OPENBLAS_CORETYPE");
  }
}

}  // namespace
}  // namespace dapple
