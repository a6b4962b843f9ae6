// Reader and writer of profile JSON (`dapple-profile/1`, docs/design.md section 8).
#include <map>

#include "dapple/common/error.h"
#include "dapple/format/json_text.h"
#include "dapple/format/profile.h"
#include "dapple/format/settings.h"

namespace dapple {
namespace {

constexpr const char* kProfileFormat = "dapple-profile/1";

std::vector<double> ReadNumbers(const JsonField& f) {
  std::vector<double> out;
  for (size_t k = 0; k < f.size(); ++k) out.push_back(f[k].NonNegative());
  return out;
}

LayerProfile ReadLayer(const JsonField& l) {
  l.ExpectObject();
  LayerProfile layer;
  layer.id = l["id"].String();
  layer.name = l.Has("name") ? l["name"].String() : layer.id;
  layer.forward_ms = l["forward_ms"].NonNegative();
  layer.backward_ms = l["backward_ms"].NonNegative();
  layer.activation_bytes = l["activation_bytes"].NonNegative();
  layer.parameter_bytes = l["parameter_bytes"].NonNegative();
  if (l.Has("saved_bytes")) layer.saved_bytes = l["saved_bytes"].NonNegative();
  if (l.Has("update_ms")) layer.update_ms = l["update_ms"].NonNegative();
  if (l.Has("forward_ms_by_batch"))
    layer.forward_ms_by_batch = ReadNumbers(l["forward_ms_by_batch"]);
  if (l.Has("backward_ms_by_batch"))
    layer.backward_ms_by_batch = ReadNumbers(l["backward_ms_by_batch"]);
  if (l.Has("backward_input_ms")) layer.backward_input_ms = l["backward_input_ms"].NonNegative();
  if (l.Has("backward_weight_ms")) layer.backward_weight_ms = l["backward_weight_ms"].NonNegative();
  if (l.Has("backward_input_ms_by_batch"))
    layer.backward_input_ms_by_batch = ReadNumbers(l["backward_input_ms_by_batch"]);
  if (l.Has("backward_weight_ms_by_batch"))
    layer.backward_weight_ms_by_batch = ReadNumbers(l["backward_weight_ms_by_batch"]);
  return layer;
}

}  // namespace

Profile ParseProfileJson(const std::string& text, const std::string& source) {
  Json j = format_internal::ParseJsonText(text, source);
  JsonField root(j, source);
  format_internal::ExpectFormat(root, kProfileFormat);
  Profile p;
  p.model = root.Has("model") ? root["model"].String() : "";
  p.device = root.Has("device") ? root["device"].String() : "";
  p.batch_size = root["batch_size"].PositiveInt();
  if (root.Has("precision")) p.precision = format_internal::ReadPrecision(root["precision"]);
  if (root.Has("input_bytes")) p.input_bytes = root["input_bytes"].NonNegative();
  if (root.Has("data_input_bytes")) p.data_input_bytes = root["data_input_bytes"].NonNegative();
  if (root.Has("data_target_bytes")) p.data_target_bytes = root["data_target_bytes"].NonNegative();
  JsonField layers = root["layers"];
  std::map<std::string, int> index;
  for (size_t i = 0; i < layers.size(); ++i) {
    p.layers.push_back(ReadLayer(layers[i]));
    if (!index.emplace(p.layers.back().id, static_cast<int>(i)).second)
      layers[i]["id"].Fail(fmt::format("'{}' is not unique", p.layers.back().id));
  }
  if (root.Has("batch_sizes")) {
    JsonField bs = root["batch_sizes"];
    for (size_t k = 0; k < bs.size(); ++k) p.batch_sizes.push_back(bs[k].PositiveInt());
  }
  if (root.Has("metadata")) {
    JsonField meta = root["metadata"];
    meta.ExpectObject();
    for (const auto& [key, value] : meta.json().items()) p.metadata[key] = meta[key].String();
  }
  if (root.Has("settings")) p.settings = ReadProfileSettings(root["settings"]);
  if (root.Has("edges")) {
    JsonField edges = root["edges"];
    for (size_t e = 0; e < edges.size(); ++e) {
      JsonField pair = edges[e];
      if (pair.size() != 2) pair.Fail("expected [from_id, to_id]");
      int ends[2];
      for (size_t k = 0; k < 2; ++k) {
        std::string id = pair[k].String();
        auto it = index.find(id);
        if (it == index.end()) pair[k].Fail(fmt::format("no layer has id '{}'", id));
        ends[k] = it->second;
      }
      if (ends[0] >= ends[1])
        pair.Fail(
            fmt::format("edge {} -> {} goes backwards: layers must be listed in topological order",
                        p.layers[ends[0]].id, p.layers[ends[1]].id));
      p.edges.emplace_back(ends[0], ends[1]);
    }
  }
  ValidateProfile(p, source);
  return p;
}

Profile ReadProfileJson(const std::filesystem::path& path) {
  return ParseProfileJson(format_internal::ReadTextFile(path.string()), path.string());
}

std::string ProfileToJsonText(const Profile& p) {
  using OJson = nlohmann::ordered_json;
  OJson root;
  root["format"] = kProfileFormat;
  root["model"] = p.model;
  root["device"] = p.device;
  root["batch_size"] = p.batch_size;
  if (p.precision != Precision::kFloat32) root["precision"] = ToString(p.precision);
  if (!p.batch_sizes.empty()) root["batch_sizes"] = p.batch_sizes;
  if (p.input_bytes > 0) root["input_bytes"] = p.input_bytes;
  if (p.data_input_bytes > 0) root["data_input_bytes"] = p.data_input_bytes;
  if (p.data_target_bytes > 0) root["data_target_bytes"] = p.data_target_bytes;
  OJson layers = OJson::array();
  for (const LayerProfile& l : p.layers) {
    OJson o;
    o["id"] = l.id;
    o["name"] = l.name;
    o["forward_ms"] = l.forward_ms;
    o["backward_ms"] = l.backward_ms;
    o["activation_bytes"] = l.activation_bytes;
    o["parameter_bytes"] = l.parameter_bytes;
    if (l.saved_bytes >= 0) o["saved_bytes"] = l.saved_bytes;
    // Only when measured, so profiles without it stay byte-identical.
    if (l.update_ms != 0) o["update_ms"] = l.update_ms;
    if (!l.forward_ms_by_batch.empty()) o["forward_ms_by_batch"] = l.forward_ms_by_batch;
    if (!l.backward_ms_by_batch.empty()) o["backward_ms_by_batch"] = l.backward_ms_by_batch;
    if (l.has_backward_split()) {
      o["backward_input_ms"] = l.backward_input_ms;
      o["backward_weight_ms"] = l.backward_weight_ms;
      if (!l.backward_input_ms_by_batch.empty())
        o["backward_input_ms_by_batch"] = l.backward_input_ms_by_batch;
      if (!l.backward_weight_ms_by_batch.empty())
        o["backward_weight_ms_by_batch"] = l.backward_weight_ms_by_batch;
    }
    layers.push_back(std::move(o));
  }
  root["layers"] = std::move(layers);
  if (!p.edges.empty()) {
    OJson edges = OJson::array();
    for (auto [from, to] : p.edges)
      edges.push_back(OJson::array({p.layers.at(from).id, p.layers.at(to).id}));
    root["edges"] = std::move(edges);
  }
  if (!p.metadata.empty()) root["metadata"] = p.metadata;
  if (p.settings) root["settings"] = ProfileSettingsToJson(*p.settings);
  return root.dump(2) + "\n";
}

void WriteProfileJson(const Profile& p, const std::filesystem::path& path) {
  WriteFileAtomic(path, ProfileToJsonText(p));
}

}  // namespace dapple
