// The launcher options `dapple train` and `dapple calibrate` share (--nproc, --nnodes,
// --node-rank, --master-addr, --master-port), declared once, and how they fill LaunchOptions.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "dapple/runtime/launch/launcher.h"

namespace dapple {

// What the options hold after parsing. nproc == 0 means "no launcher here": this process is
// one rank of a job whose launcher set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.
struct LaunchCli {
  int nproc = 0;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port (one node only)

  // Processes of the whole job: node n runs global ranks n*nproc .. n*nproc+nproc-1, which
  // are a plan's device ids, so node n holds devices n*nproc .. n*nproc+nproc-1.
  int world_size() const { return nproc * nnodes; }
};

// Declares the five options on `cmd`, storing into *cli (which must outlive parsing);
// `nproc_help` describes --nproc for this command. --nnodes, --node-rank, --master-addr and
// --master-port require --nproc.
void AddLaunchOptions(CLI::App* cmd, LaunchCli* cli, const std::string& nproc_help);

// The LaunchOptions of this node: checks --node-rank < --nnodes and that a job of several
// nodes names its port (else InputError naming `command`), picks a free port for one node
// when none was given. REQUIRES: cli.nproc > 0, !argv.empty().
LaunchOptions MakeLaunchOptions(const std::string& command, const LaunchCli& cli,
                                std::vector<std::string> argv);

// This process's own command line (/proc/self/cmdline) with argv[0] replaced by
// SelfExecutablePath() and without the five launcher options (and train's --max-restarts and
// --exclude-devices)
// and their values, in both forms "--opt V" and "--opt=V": what each rank of a launcher runs.
std::vector<std::string> SelfArgvWithoutLaunchOptions();

}  // namespace dapple
