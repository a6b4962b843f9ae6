// `dapple` as the front door (Note [Two executables], tools/dapple/torch_commands.h): --help,
// --version, `plan` and `simulate` load no libtorch; --help lists every command; --version
// names the build; a missing dapple-torch is one line. tests/torch/front_door_torch_test.cc
// has the other side: the torch commands do load libtorch through it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "cli/cli_test_util.h"
#include "cli/loaded_libraries.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;

class FrontDoor : public testing::CliTest {
 protected:
  testing::LoadedLibraries Libraries(const std::string& args) {
    return testing::RunAndListLibraries(std::string(DAPPLE_BINARY) + " " + args, dir_ / "ld.log");
  }
  static std::string Profile() {
    return std::string(DAPPLE_DATA_DIR) + "/profiles/dapple/vgg-19-pbs-32.txt";
  }
};

// libtorch's own objects: libtorch*.so, libc10.so, and the libtorch_cpu/python of Debian's build.
bool HasLibtorch(const testing::LoadedLibraries& l) { return l.Has("libtorch") || l.Has("libc10"); }

TEST_F(FrontDoor, HelpAndVersionLoadNoLibtorch) {
  for (const char* args : {"--help", "--version", "plan --help", "simulate --help"}) {
    testing::LoadedLibraries l = Libraries(args);
    EXPECT_EQ(l.code, 0) << args;
    EXPECT_TRUE(l.Has("libc.so")) << args << ": the loader's report was not read";
    EXPECT_FALSE(HasLibtorch(l)) << args;
  }
}

TEST_F(FrontDoor, PlanAndSimulateLoadNoLibtorch) {
  fs::path plan = dir_ / "plan.json";
  testing::LoadedLibraries p =
      Libraries("plan --profile " + Profile() +
                " --cluster paper-a --global-batch 64 --no-baselines -o " + plan.string());
  ASSERT_EQ(p.code, 0) << testing::Slurp(dir_ / "ld.log");
  EXPECT_TRUE(p.Has("libc.so"));
  EXPECT_FALSE(HasLibtorch(p));
  testing::LoadedLibraries s =
      Libraries("simulate --profile " + Profile() + " --cluster paper-a --plan " + plan.string());
  ASSERT_EQ(s.code, 0);
  EXPECT_TRUE(s.Has("libc.so"));
  EXPECT_FALSE(HasLibtorch(s));
}

TEST_F(FrontDoor, HelpListsEveryCommand) {
  testing::CliRun r = Dapple("--help");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* c : {"plan", "simulate", "profile", "train", "calibrate"})
    EXPECT_NE(r.out.find("\n  " + std::string(c) + " "), std::string::npos) << c << "\n" << r.out;
  EXPECT_NE(r.out.find("Torch commands"), std::string::npos) << r.out;
}

TEST_F(FrontDoor, VersionNamesTheBuild) {
  testing::CliRun r = Dapple("--version");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("dapple 0.1.0 (git ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" at configure time, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ntorch commands (profile, train, calibrate"), std::string::npos) << r.out;
#ifdef DAPPLE_TORCH_BINARY
  if (fs::exists(DAPPLE_TORCH_BINARY)) {
    EXPECT_NE(r.out.find(std::string(DAPPLE_TORCH_BINARY) + " (libtorch "), std::string::npos)
        << r.out;
  } else {  // configured with libtorch, dapple-torch not built yet
    EXPECT_NE(r.out.find("but dapple-torch is missing"), std::string::npos) << r.out;
  }
#else
  EXPECT_NE(r.out.find("not built (configured with DAPPLE_WITH_TORCH=OFF)"), std::string::npos)
      << r.out;
#endif
}

// A `dapple` copied away from its dapple-torch: a torch command is one line naming where it
// looked, exit code 1, and the torch-free commands still run.
TEST_F(FrontDoor, MissingTorchExecutableIsOneLine) {
  fs::create_directories(dir_ / "bin");
  fs::path lone = dir_ / "bin" / "dapple";
  fs::copy_file(DAPPLE_BINARY, lone);
  for (const char* args : {"train --help", "profile --model mlp", "calibrate -o x.json"}) {
    int status = std::system((lone.string() + " " + args + " >" + (dir_ / "out").string() + " 2>" +
                              (dir_ / "err").string())
                                 .c_str());
    EXPECT_EQ(WEXITSTATUS(status), 1) << args;
    std::string err = testing::Slurp(dir_ / "err");
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_EQ(err.rfind("dapple: error: `", 0), 0u) << err;
    EXPECT_NE(err.find((dir_ / "bin" / "dapple-torch").string()), std::string::npos) << err;
    EXPECT_NE(err.find((dir_ / "libexec" / "dapple" / "dapple-torch").string()), std::string::npos)
        << err;
    EXPECT_EQ(testing::Slurp(dir_ / "out"), "");
  }
  EXPECT_EQ(std::system((lone.string() + " --help >/dev/null").c_str()), 0);
}

}  // namespace
}  // namespace dapple
