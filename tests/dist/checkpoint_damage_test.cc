// Checkpoints that never lose a step (Note [Checkpoint checksums]): meta.json keeps
// each layer file's size and CRC-32; a resume that finds the newest checkpoint damaged names
// the file and falls back to the one before, with the uninterrupted run's losses; with none
// intact it is one line, exit 2; a save killed half-way leaves the previous one latest;
// --keep-checkpoints K keeps the K newest.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>

#include "train_test_util.h"

namespace dapple::testing {
namespace {

std::string DamageFlags(const fs::path& ckpt, const fs::path& plan, int steps, int timeout_s = 30) {
  return std::string("train ") + kMlpFlags +
         " --dtype float64 --data synthetic --seed 5 --optimizer sgd --lr 0.05 --log-json " +
         "--timeout-s " + std::to_string(timeout_s) + " --nproc 2 --plan " + plan.string() +
         " --checkpoint-dir " + ckpt.string() + " --steps " + std::to_string(steps);
}

// zlib's CRC-32 of a whole file, computed here independently of dapple's reader.
uint32_t Crc32Of(const fs::path& p) {
  std::string bytes = Slurp(p);
  return static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

void FlipAByte(const fs::path& p) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(fs::file_size(p) / 2));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(fs::file_size(p) / 2));
  f.put(static_cast<char>(c ^ 0x5a));
}

class CheckpointDamage : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir("ckpt_damage");
    plan_ = WritePlan(dir_, "a",
                      PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1}}}, 2, 4, "dapple-a"));
    full_ = RunDapple(DamageFlags(dir_ / "full", plan_, 6), dir_);
    ASSERT_EQ(full_.exit_code, 0) << full_.err;
    ASSERT_EQ(full_.Losses().size(), 6u);
    RunResult half =
        RunDapple(DamageFlags(dir_ / "ckpt", plan_, 4) + " --checkpoint-every 2", dir_);
    ASSERT_EQ(half.exit_code, 0) << half.err;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_, plan_;
  RunResult full_;
};

TEST_F(CheckpointDamage, MetaKeepsEachFilesSizeAndCrc32) {
  const fs::path step = dir_ / "ckpt" / "step-4";
  nlohmann::json meta = nlohmann::json::parse(Slurp(step / "meta.json"));
  ASSERT_TRUE(meta.contains("files")) << meta.dump();
  for (const char* layer : {"fc0", "fc1", "fc2", "head"}) {
    const fs::path file = step / (std::string(layer) + ".pt");
    EXPECT_EQ(meta["files"][layer]["bytes"].get<int64_t>(), fs::file_size(file)) << layer;
    EXPECT_EQ(meta["files"][layer]["crc32"].get<uint32_t>(), Crc32Of(file)) << layer;
  }
}

TEST_F(CheckpointDamage, CorruptedNewestFallsBackToThePreviousOne) {
  const fs::path bad = dir_ / "ckpt" / "step-4" / "fc2.pt";
  FlipAByte(bad);  // same size, other bytes
  RunResult r = RunDapple(DamageFlags(dir_ / "ckpt", plan_, 6) + " --resume", dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(bad.string() + ": CRC-32"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("falling back"), std::string::npos) << r.err;
  // Resumed after step 2: steps 3-6, bit-identical to the uninterrupted run.
  auto want = full_.Losses(), got = r.Losses();
  ASSERT_EQ(got.size(), 4u) << r.out;
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], want[i + 2]) << "step " << i + 3;
}

TEST_F(CheckpointDamage, NothingIntactIsOneLineExitTwo) {
  fs::resize_file(dir_ / "ckpt" / "step-4" / "head.pt", 10);  // truncated
  FlipAByte(dir_ / "ckpt" / "step-2" / "fc0.pt");
  RunResult r = RunDapple(DamageFlags(dir_ / "ckpt", plan_, 6) + " --resume", dir_);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("step-4/head.pt: 10 bytes"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no intact checkpoint to resume from"), std::string::npos) << r.err;
}

TEST_F(CheckpointDamage, KeepCheckpointsKeepsTheNewest) {
  RunResult r = RunDapple(
      DamageFlags(dir_ / "kept", plan_, 5) + " --checkpoint-every 1 --keep-checkpoints 2", dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int s = 1; s <= 3; ++s) EXPECT_FALSE(fs::exists(dir_ / "kept" / fmt::format("step-{}", s)));
  EXPECT_TRUE(fs::exists(dir_ / "kept" / "step-4" / "meta.json"));
  EXPECT_TRUE(fs::exists(dir_ / "kept" / "step-5" / "meta.json"));
}

// Killed in the middle of a save (after one layer file of step 4, before the commit): the
// checkpoint of step 2 stays `latest`, and resuming from it gives the uninterrupted losses.
TEST_F(CheckpointDamage, KilledWhileSavingKeepsThePreviousCheckpoint) {
  const fs::path ckpt = dir_ / "killed";
  // The survivor waits for the dead rank's confirmation until its timeout: keep it short.
  RunResult killed = RunDapple(DamageFlags(ckpt, plan_, 6, 3) + " --checkpoint-every 2", dir_,
                               "DAPPLE_TEST_DIE_IN_SAVE=1:4");
  EXPECT_NE(killed.exit_code, 0);
  EXPECT_EQ(Slurp(ckpt / "latest"), "step-2\n");
  EXPECT_FALSE(fs::exists(ckpt / "step-4" / "meta.json"));
  RunResult r = RunDapple(DamageFlags(ckpt, plan_, 6) + " --resume", dir_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto want = full_.Losses(), got = r.Losses();
  ASSERT_EQ(got.size(), 4u) << r.out;
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], want[i + 2]) << "step " << i + 3;
}

// A checkpoint of another model is refused in one line naming its meta.json.
TEST_F(CheckpointDamage, AnotherModelsCheckpointIsOneLineExitTwo) {
  std::string flags = DamageFlags(dir_ / "ckpt", plan_, 6) + " --resume";
  flags.replace(flags.find("--opt layers=3"), 14, "--opt layers=2");
  fs::path plan2 =
      WritePlan(dir_, "b", PlanJson({{"fc0", "fc0", {0}}, {"fc1", "head", {1}}}, 2, 4, "dapple-a"));
  flags.replace(flags.find(plan_.string()), plan_.string().size(), plan2.string());
  RunResult r = RunDapple(flags, dir_);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("step-4/meta.json: layers [fc0, fc1, fc2, head] differ"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace dapple::testing
