// Confirmation of checkpoint files before the commit: see checkpoint_commit.h.
#include "dapple/runtime/checkpoint/checkpoint_commit.h"

#include <fmt/format.h>

#include <map>
#include <system_error>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"
#include "dapple/runtime/checkpoint/checkpoint.h"

namespace dapple {

std::string DescribeWrittenLayers(const std::vector<WrittenLayer>& written) {
  Json j = Json::array();
  for (const WrittenLayer& w : written)
    j.push_back({{"layer", w.layer}, {"bytes", w.bytes}, {"crc32", w.crc32}});
  return j.dump();
}

std::map<std::string, LayerFileSum> VerifyWrittenLayers(const std::filesystem::path& step_dir,
                                                        const std::vector<std::string>& layers,
                                                        const std::vector<std::string>& reports) {
  struct Confirmed {
    int rank;
    int64_t bytes;
    uint32_t crc32;
  };
  std::map<std::string, Confirmed> confirmed;
  for (int r = 0; r < static_cast<int>(reports.size()); ++r) {
    Json j = Json::parse(reports[r], nullptr, /*allow_exceptions=*/false);
    if (!j.is_array())
      throw Error(
          fmt::format("{}: rank {} sent a malformed checkpoint report", step_dir.string(), r));
    for (const Json& w : j) {
      std::string layer = w.value("layer", "");
      auto [it, fresh] = confirmed.emplace(
          layer, Confirmed{r, w.value("bytes", int64_t{-1}), w.value("crc32", uint32_t{0})});
      if (!fresh) {
        throw Error(fmt::format("{}: layer {} was written by rank {} and rank {}; not committed",
                                step_dir.string(), layer, it->second.rank, r));
      }
    }
  }
  for (const std::string& layer : layers) {
    auto it = confirmed.find(layer);
    if (it == confirmed.end()) {
      throw Error(fmt::format("{}: no rank confirmed writing layer {}; not committed",
                              step_dir.string(), layer));
    }
    std::error_code ec;
    const auto file = LayerFile(step_dir, layer);
    const auto size = std::filesystem::file_size(file, ec);
    if (!ec && static_cast<int64_t>(size) != it->second.bytes) {
      throw Error(fmt::format("{}: {} bytes, but rank {} wrote {}; not committed", file.string(),
                              size, it->second.rank, it->second.bytes));
    }
  }
  std::map<std::string, LayerFileSum> sums;
  for (const std::string& layer : layers)
    sums[layer] = {confirmed.at(layer).bytes, confirmed.at(layer).crc32};
  return sums;
}

}  // namespace dapple
