// Checkpoint checksums, fallback and pruning: see checkpoint_sums.h.
#include "dapple/runtime/checkpoint/checkpoint_sums.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <system_error>

#include "dapple/common/error.h"

namespace dapple {
namespace {

// The step of a folder named step-<N>, or -1.
int64_t StepOfFolder(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  if (name.rfind("step-", 0) != 0 || name.size() == 5) return -1;
  int64_t n = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

}  // namespace

LayerFileSum SumOfFile(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) ThrowInput("{}: cannot open the checkpoint file", file.string());
  uLong crc = crc32(0L, Z_NULL, 0);
  LayerFileSum sum;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize n = in.gcount();
    if (n <= 0) break;
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(n));
    sum.bytes += n;
  }
  sum.crc32 = static_cast<uint32_t>(crc);
  return sum;
}

std::string CheckLayerFiles(const std::filesystem::path& step_dir, const CheckpointMeta& meta,
                            const std::vector<std::string>& layers, bool only_existing) {
  if (meta.files.empty()) return "";  // written before checkpoints held sums
  for (const std::string& layer : layers) {
    const auto file = LayerFile(step_dir, layer);
    auto it = meta.files.find(layer);
    if (it == meta.files.end()) {
      return fmt::format("{}: meta.json has no checksum of layer {}", step_dir.string(), layer);
    }
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
      if (only_existing) continue;
      return fmt::format("{}: missing", file.string());
    }
    LayerFileSum got;
    try {
      got = SumOfFile(file);
    } catch (const InputError& e) {
      return e.what();
    }
    if (got.bytes != it->second.bytes) {
      return fmt::format("{}: {} bytes, but {} were written (truncated or replaced)", file.string(),
                         got.bytes, it->second.bytes);
    }
    if (got.crc32 != it->second.crc32) {
      return fmt::format("{}: CRC-32 {:08x}, but {:08x} was written (corrupted)", file.string(),
                         got.crc32, it->second.crc32);
    }
  }
  return "";
}

std::vector<std::filesystem::path> CommittedCheckpoints(const std::filesystem::path& dir) {
  std::vector<std::pair<int64_t, std::filesystem::path>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const int64_t step = StepOfFolder(entry.path());
    if (step >= 0 && std::filesystem::exists(entry.path() / "meta.json", ec))
      found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::filesystem::path> out;
  for (auto& [step, p] : found) out.push_back(std::move(p));
  return out;
}

std::optional<std::filesystem::path> NewestIntactCheckpoint(const std::filesystem::path& dir) {
  const auto latest = LatestCheckpoint(dir);
  if (!latest) return std::nullopt;
  const int64_t latest_step = StepOfFolder(*latest);
  auto all = CommittedCheckpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (latest_step >= 0 && StepOfFolder(*it) > latest_step) continue;  // never committed
    std::string why;
    try {
      CheckpointMeta meta = ReadCheckpointMeta(*it);
      why = CheckLayerFiles(*it, meta, meta.layers, /*only_existing=*/true);
    } catch (const InputError& e) {
      why = e.what();
    }
    if (why.empty()) return *it;
    std::fprintf(stderr, "checkpoint %s is damaged: %s; falling back to the one before\n",
                 it->c_str(), why.c_str());
  }
  return std::nullopt;
}

void PruneCheckpoints(const std::filesystem::path& dir, int keep) {
  if (keep <= 0) return;
  const auto latest = LatestCheckpoint(dir);
  auto all = CommittedCheckpoints(dir);
  int excess = static_cast<int>(all.size()) - keep;
  for (size_t i = 0; i < all.size() && excess > 0; ++i) {
    if (latest && all[i].filename() == latest->filename()) continue;
    std::error_code ec;
    std::filesystem::remove_all(all[i], ec);  // a folder left behind is only disk space
    --excess;
  }
}

}  // namespace dapple
