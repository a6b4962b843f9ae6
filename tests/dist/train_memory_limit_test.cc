// A model larger than one process's memory loads and trains under a 4-stage plan, as a
// TorchScript file (Note [Loading only what a stage reads] in models/lazy_archive.h) and as a
// torch.export program (a process reads its held layers' weight records only): each rank
// runs in a cgroup of its own whose memory limit is below the model's parameters, so a rank
// that read the whole archive would be killed (exit 137).
#include <gtest/gtest.h>

#include <thread>

#include "dist/train_test_util.h"

namespace dapple::testing {
namespace {

const fs::path kMemoryCgroups = "/sys/fs/cgroup/memory";

// A cgroup (v1 memory controller) with a limit, removed at destruction.
struct MemoryGroup {
  fs::path dir;
  MemoryGroup(const std::string& name, int64_t limit_bytes) : dir(kMemoryCgroups / name) {
    fs::create_directories(dir);
    std::ofstream(dir / "memory.limit_in_bytes") << limit_bytes;
    std::ofstream(dir / "memory.memsw.limit_in_bytes") << limit_bytes;  // no swap, where kept
  }
  ~MemoryGroup() {
    std::error_code ec;
    fs::remove(dir, ec);
  }
  int64_t Failures() const {
    int64_t n = 0;
    std::ifstream(dir / "memory.failcnt") >> n;
    return n;
  }
};

bool CanLimitMemory() {
  const fs::path probe = kMemoryCgroups / ("dapple_probe_" + std::to_string(::getpid()));
  std::error_code ec;
  if (!fs::create_directory(probe, ec)) return false;
  bool ok = fs::exists(probe / "memory.limit_in_bytes");
  fs::remove(probe, ec);
  return ok;
}

// 8 x Linear(4096, 4096): 134 M parameters, 537 MB in float32; each stage holds 2 (134 MB).
// `save` is the Python that writes the nn.Sequential `m` to `model`.
void WriteBigModel(const fs::path& dir, const fs::path& model, const std::string& save) {
  const std::string write =
      DAPPLE_PYTHON
      " -c \"import torch, torch.nn as nn; torch.manual_seed(0); "
      "layers = []\nfor i in range(8): layers += [nn.Linear(4096, 4096), nn.ReLU()]\n"
      "m = nn.Sequential(*layers); path = '" +
      model.string() + "'; " + save +
      "; torch.save({'input': torch.randn(16, 4096), 'target': torch.randint(0, 4096, (16,))}, "
      "'" +
      (dir / "data.pt").string() + "')\"";
  ASSERT_EQ(std::system(write.c_str()), 0) << write;
}

// Trains `model` (written by WriteBigModel) for 2 steps under 4 stages, each rank in a cgroup
// with a limit below the model's size.
void TrainUnderFourStages(const fs::path& dir, const fs::path& model) {
  fs::path plan =
      WritePlan(dir, "plan",
                PlanJson({{"0", "2", {0}}, {"4", "6", {1}}, {"8", "10", {2}}, {"12", "14", {3}}}, 2,
                         2, "dapple-a"));
  // Measured under a 620 MB limit: each rank's group peaked at 402-407 MB (its stage 128 MB,
  // gradients 128 MB, one accumulation, the rest of the process; libtorch's code pages are
  // charged to the group that first read them). Reading the whole archive would add the
  // other stages' 403 MB to a rank's load (about 620 MB of its own memory, beyond the page
  // cache of the file it reads).
  const int64_t limit = 560LL << 20;
  const int port = 29000 + (::getpid() + static_cast<int>(model.extension() == ".pt2")) % 2000;
  std::vector<std::unique_ptr<MemoryGroup>> groups;
  std::vector<std::thread> ranks;
  std::vector<int> codes(4, -1);
  for (int r = 0; r < 4; ++r) {
    groups.push_back(std::make_unique<MemoryGroup>(
        "dapple_test_" + std::to_string(::getpid()) + "_" + std::to_string(r), limit));
    std::string cmd =
        "sh -c 'echo $$ > " + (groups.back()->dir / "cgroup.procs").string() +
        " && exec env RANK=" + std::to_string(r) + " WORLD_SIZE=4 LOCAL_RANK=" + std::to_string(r) +
        " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " + DAPPLE_BINARY +
        " train --model " + model.string() + " --plan " + plan.string() + " --data " +
        (dir / "data.pt").string() +
        " --loss cross-entropy --momentum 0 --lr 0.01 --steps 2 --timeout-s 120 " +
        "--log-json' > " + (dir / ("rank" + std::to_string(r) + ".out")).string() + " 2>&1";
    ranks.emplace_back([cmd, &codes, r] {
      int status = std::system(cmd.c_str());
      codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(codes[r], 0) << "rank " << r << " (137: killed at the memory limit):\n"
                           << Slurp(dir / ("rank" + std::to_string(r) + ".out"));
  }
  RunResult r0;
  std::istringstream lines(Slurp(dir / "rank0.out"));
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] == '{')
      r0.lines.push_back(nlohmann::json::parse(line, nullptr, false));
  EXPECT_EQ(r0.Losses().size(), 2u);
}

TEST(MemoryLimitTest, ModelLargerThanAProcessTrainsUnderFourStages) {
  if (!CanLimitMemory()) GTEST_SKIP() << "the cgroup v1 memory controller is not writable here";
  fs::path dir = TestDir("memory_limit");
  WriteBigModel(dir, dir / "big.pt", "torch.jit.script(m).save(path)");
  TrainUnderFourStages(dir, dir / "big.pt");
}

TEST(MemoryLimitTest, ExportedProgramLargerThanAProcessTrainsUnderFourStages) {
  if (!CanLimitMemory()) GTEST_SKIP() << "the cgroup v1 memory controller is not writable here";
  fs::path dir = TestDir("memory_limit_export");
  WriteBigModel(dir, dir / "big.pt2",
                "torch.export.save(torch.export.export(m.train(), (torch.randn(4, 4096),), "
                "dynamic_shapes=({0: torch.export.Dim('batch')},)), path)");
  TrainUnderFourStages(dir, dir / "big.pt2");
}

}  // namespace
}  // namespace dapple::testing
