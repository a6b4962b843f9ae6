// Note [The libcuda stub]: the CUDA toolkit ships stubs/libcuda.so, a library with the driver's
// symbols and none of its code, for linking where no driver is installed. A binary that names
// it (a NEEDED libcuda entry) or searches a stubs folder (RPATH/RUNPATH) would, on a GPU
// machine, load the stub instead of the driver and find no GPU. libtorch loads the driver
// itself, by name, when it first needs it; dapple's binaries must neither need libcuda nor
// search the stubs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"

namespace dapple {
namespace {

// The dynamic section of `binary` as `readelf -d` prints it.
std::string DynamicSection(const std::string& binary, const std::filesystem::path& dir) {
  const auto out = dir / "readelf.txt";
  const std::string cmd = fmt::format("readelf -d {} > {}", binary, out.string());
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return testing::Slurp(out);
}

// The lines of `text` that contain `part`.
std::vector<std::string> LinesWith(const std::string& text, const std::string& part) {
  std::vector<std::string> found;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find(part) != std::string::npos) found.push_back(line);
  return found;
}

class CudaStub : public testing::CliTest {};

TEST_F(CudaStub, NoBinaryNeedsLibcudaOrSearchesTheStubs) {
  for (const std::string binary : {DAPPLE_TORCH_BINARY, DAPPLE_BINARY, "/proc/self/exe"}) {
    const std::string dynamic = DynamicSection(binary, dir_);
    ASSERT_FALSE(LinesWith(dynamic, "(NEEDED)").empty()) << binary << ": no dynamic section read";
    EXPECT_TRUE(LinesWith(dynamic, "[libcuda.so").empty()) << binary << " needs libcuda:\n"
                                                           << dynamic;
    for (const std::string& line : LinesWith(dynamic, "PATH)")) {
      EXPECT_EQ(line.find("stubs"), std::string::npos) << binary << " searches stubs: " << line;
    }
  }
}

// What the loader maps when CUDA is loaded (Note [CUDA on demand]: by the NCCL test of this
// binary, which loads libdapple_cuda.so): libtorch's CUDA libraries, never a stub.
TEST_F(CudaStub, CudaLoadMapsNoStub) {
  const auto log = dir_ / "ld.txt";
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = fmt::format(
      "LD_DEBUG=libs {} --gtest_filter=NcclBackend.WithoutACudaDeviceIsOneLineNamingTheRank "
      "> /dev/null 2> {}",
      self, log.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string loaded = testing::Slurp(log);
  ASSERT_FALSE(LinesWith(loaded, "libtorch_cuda").empty()) << "the CUDA build is not loaded";
  EXPECT_TRUE(LinesWith(loaded, "stubs/").empty()) << LinesWith(loaded, "stubs/").front();
}

}  // namespace
}  // namespace dapple
