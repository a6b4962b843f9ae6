// NCCL on a machine without a GPU: compiled and linked in every build, refused in one line.
// Note [CUDA on demand]: this process maps no CUDA library until NCCL is asked for, which loads
// libdapple_cuda.so and libtorch_cuda with it.
#include "dapple/runtime/comm/nccl_backend.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "cli/loaded_libraries.h"
#include "dapple/common/error.h"
#include "dapple/runtime/comm/cuda_module.h"

namespace dapple {
namespace {

bool Mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream all;
  all << maps.rdbuf();
  return all.str().find(library) != std::string::npos;
}

TEST(NcclBackend, WithoutACudaDeviceIsOneLineNamingTheRank) {
  if (NvidiaDriverPresent()) GTEST_SKIP() << "this machine has an NVIDIA driver";
  EXPECT_TRUE(Mapped("libtorch_cpu.so"));
  EXPECT_FALSE(Mapped("libtorch_cuda.so"));
  EXPECT_FALSE(Mapped("libcublas"));
  auto store = c10::make_intrusive<c10d::HashStore>();
  try {
    MakeNcclBackend(store, 0, 1, std::chrono::seconds(10));
    FAIL() << "NCCL started without a CUDA device";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "rank 0: NCCL needs a CUDA device, and this machine has none");
  }
  EXPECT_TRUE(Mapped("libdapple_cuda.so"));
  EXPECT_TRUE(Mapped("libtorch_cuda.so"));
}

// A whole command on the CPU: `dapple profile` maps libtorch_cpu and no CUDA library.
TEST(NcclBackend, ACpuCommandLoadsNoCudaLibrary) {
  if (NvidiaDriverPresent()) GTEST_SKIP() << "this machine has an NVIDIA driver";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("dapple_cuda_on_demand_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const testing::LoadedLibraries l = testing::RunAndListLibraries(
      std::string(DAPPLE_BINARY) +
          " profile --model mlp --opt hidden=8 --opt layers=2 --batch 2 --batches 2 "
          "--warmup 0 --repeat 1 -o " +
          (dir / "p.json").string(),
      dir / "ld.log");
  EXPECT_EQ(l.code, 0);
  EXPECT_TRUE(l.Has("libtorch_cpu.so"));
  EXPECT_FALSE(l.Has("libtorch_cuda.so"));
  EXPECT_FALSE(l.Has("libcublas"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dapple
