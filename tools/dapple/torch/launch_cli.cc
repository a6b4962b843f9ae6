// Launcher options shared by `dapple train` and `dapple calibrate` (see launch_cli.h).
#include "launch_cli.h"

#include <array>
#include <fstream>
#include <iterator>
#include <string_view>

#include "dapple/common/error.h"

namespace dapple {
namespace {

// Options of the launcher, not of its ranks. --max-restarts and --exclude-devices are train's
// (Note [Restarts], elastic.h): a rank never restarts anything, and its launcher has already
// planned without the excluded devices.
constexpr std::array<std::string_view, 7> kLaunchOptions = {
    "--nproc",       "--nnodes",       "--node-rank",      "--master-addr",
    "--master-port", "--max-restarts", "--exclude-devices"};

}  // namespace

void AddLaunchOptions(CLI::App* cmd, LaunchCli* cli, const std::string& nproc_help) {
  CLI::Option* nproc =
      cmd->add_option("--nproc", cli->nproc, nproc_help)->check(CLI::Range(1, 1024));
  cmd->add_option("--nnodes", cli->nnodes, "nodes of the job, each with its own launcher")
      ->check(CLI::Range(1, 100000))
      ->needs(nproc);
  cmd->add_option("--node-rank", cli->node_rank,
                  "this node's index: its processes are ranks node-rank*nproc .. +nproc-1, "
                  "the plan's devices of that number")
      ->check(CLI::NonNegativeNumber)
      ->needs(nproc);
  cmd->add_option("--master-addr", cli->master_addr,
                  "rendezvous address: node 0's, reachable from every node")
      ->capture_default_str()
      ->needs(nproc);
  cmd->add_option("--master-port", cli->master_port,
                  "rendezvous port (default: a free port on one node; required with --nnodes > 1)")
      ->check(CLI::Range(1, 65535))
      ->needs(nproc);
}

LaunchOptions MakeLaunchOptions(const std::string& command, const LaunchCli& cli,
                                std::vector<std::string> argv) {
  if (cli.node_rank >= cli.nnodes)
    ThrowInput("{}: --node-rank {} must be below --nnodes {}", command, cli.node_rank, cli.nnodes);
  LaunchOptions lo;
  lo.nproc_per_node = cli.nproc;
  lo.nnodes = cli.nnodes;
  lo.node_rank = cli.node_rank;
  lo.master_addr = cli.master_addr;
  lo.master_port = cli.master_port;
  if (lo.master_port == 0) {
    if (cli.nnodes > 1) ThrowInput("{}: --nnodes {} needs --master-port", command, cli.nnodes);
    lo.master_port = PickFreePort();
  }
  lo.argv = std::move(argv);
  return lo;
}

std::vector<std::string> SelfArgvWithoutLaunchOptions() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::string> args;
  for (size_t i = 0; i < all.size();) {
    size_t end = all.find('\0', i);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(i, end - i));
    i = end + 1;
  }
  std::vector<std::string> out = {SelfExecutablePath()};
  for (size_t i = 1; i < args.size(); ++i) {
    bool drop = false;
    for (std::string_view opt : kLaunchOptions) {
      if (args[i] == opt) {
        ++i;  // and its value
        drop = true;
      } else if (args[i].size() > opt.size() && args[i].compare(0, opt.size(), opt) == 0 &&
                 args[i][opt.size()] == '=') {
        drop = true;
      }
      if (drop) break;
    }
    if (!drop) out.push_back(args[i]);
  }
  return out;
}

}  // namespace dapple
