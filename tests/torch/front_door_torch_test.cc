// The torch side of the front door (Note [Two executables], tools/dapple/torch_commands.h):
// `dapple <torch command>` runs dapple-torch, which loads libtorch (the loader's report that
// tests/cli/front_door_test.cc reads does see it); `dapple --help` lists dapple-torch's commands
// with dapple-torch's own summaries; an installed tree (bin/dapple, libexec/dapple/dapple-torch)
// finds it.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "cli/cli_test_util.h"
#include "cli/loaded_libraries.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;

class FrontDoorTorch : public testing::CliTest {
 protected:
  testing::CliRun Run(const std::string& binary, const std::string& args) {
    fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    int status =
        std::system((binary + " " + args + " >" + out.string() + " 2>" + err.string()).c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, testing::Slurp(out), testing::Slurp(err)};
  }
};

// The "  name   summary" rows of a CLI11 help text, from the first line that names a group of
// sub-commands ("Subcommands:", "Torch commands ...:") on.
std::map<std::string, std::string> CommandRows(const std::string& help) {
  std::map<std::string, std::string> rows;
  std::istringstream in(help);
  bool in_commands = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != ' ') {
      in_commands = line.find("ommands") != std::string::npos && line.back() == ':';
      continue;
    }
    if (!in_commands || line.size() < 3 || line[2] == ' ') continue;
    size_t end = line.find(' ', 2);
    size_t text = line.find_first_not_of(' ', end);
    rows[line.substr(2, end - 2)] = text == std::string::npos ? "" : line.substr(text);
  }
  return rows;
}

TEST_F(FrontDoorTorch, TorchCommandsLoadLibtorch) {
  testing::LoadedLibraries l =
      testing::RunAndListLibraries(std::string(DAPPLE_BINARY) + " profile --help", dir_ / "ld");
  EXPECT_EQ(l.code, 0);
  EXPECT_TRUE(l.Has("libtorch")) << "the check of tests/cli/front_door_test.cc would miss it";
}

TEST_F(FrontDoorTorch, HelpListsDappleTorchCommandsWithTheirSummaries) {
  testing::CliRun torch = Run(DAPPLE_TORCH_BINARY, "--help");
  ASSERT_EQ(torch.code, 0) << torch.err;
  testing::CliRun front = Dapple("--help");
  ASSERT_EQ(front.code, 0) << front.err;
  std::map<std::string, std::string> torch_rows = CommandRows(torch.out);
  std::map<std::string, std::string> front_rows = CommandRows(front.out);
  ASSERT_GE(torch_rows.size(), 3u) << torch.out;
  for (const auto& [name, summary] : torch_rows) {
    ASSERT_TRUE(front_rows.count(name)) << name << " is missing from `dapple --help` (add it to "
                                        << "tools/dapple/torch_commands.cc)\n"
                                        << front.out;
    EXPECT_EQ(front_rows[name], summary) << name;
    front_rows.erase(name);
  }
  // What is left are the front door's own commands.
  EXPECT_EQ(front_rows.size(), 2u);
  EXPECT_TRUE(front_rows.count("plan") && front_rows.count("simulate")) << front.out;
}

// `dapple <torch command>` behaves as dapple-torch does: same output, same exit code.
TEST_F(FrontDoorTorch, TorchCommandIsHandedOver) {
  for (const char* args : {"train --help", "profile --model no-such-model"}) {
    testing::CliRun torch = Run(DAPPLE_TORCH_BINARY, args);
    testing::CliRun front = Dapple(args);
    EXPECT_EQ(front.code, torch.code) << args;
    EXPECT_EQ(front.err, torch.err) << args;
  }
  testing::CliRun help = Dapple("train --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--plan"), std::string::npos) << help.out;
}

// The layout of `cmake --install`: bin/dapple finds libexec/dapple/dapple-torch.
TEST_F(FrontDoorTorch, InstalledTreeFindsDappleTorch) {
  fs::create_directories(dir_ / "bin");
  fs::create_directories(dir_ / "libexec" / "dapple");
  fs::copy_file(DAPPLE_BINARY, dir_ / "bin" / "dapple");
  fs::path torch = dir_ / "libexec" / "dapple" / "dapple-torch";
  fs::create_symlink(DAPPLE_TORCH_BINARY, torch);
  std::string dapple = (dir_ / "bin" / "dapple").string();
  testing::CliRun help = Run(dapple, "profile --help");
  EXPECT_EQ(help.code, 0) << help.err;
  EXPECT_NE(help.out.find("--model"), std::string::npos) << help.out;
  testing::CliRun version = Run(dapple, "--version");
  EXPECT_NE(version.out.find(torch.string() + " (libtorch "), std::string::npos) << version.out;
}

}  // namespace
}  // namespace dapple
