// Profile queries, validation and format dispatch. The readers and writers live in
// profile_json.cc and pipedream_graph.cc.
#include "dapple/format/profile.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "dapple/common/error.h"
#include "dapple/format/json_text.h"

namespace dapple {

int Profile::IndexOf(const std::string& id) const {
  for (int i = 0; i < num_layers(); ++i)
    if (layers[i].id == id) return i;
  return -1;
}

// Layer u contributes activation_bytes[u] to every cut after layers u..reach[u]-1, where
// reach[u] is the largest layer u has an edge to (u + 1 in a chain). A difference array
// over those ranges gives every cut in O(N + E).
std::vector<double> Profile::AllCutBytes() const {
  const int n = num_layers();
  std::vector<int> reach(n);
  for (int u = 0; u < n; ++u) reach[u] = edges.empty() ? u + 1 : u;
  for (const auto& [from, to] : edges)
    if (from >= 0 && from < n && to > reach[from]) reach[from] = std::min(to, n);
  std::vector<double> diff(n + 1, 0.0);
  for (int u = 0; u < n; ++u) {
    if (reach[u] <= u) continue;
    diff[u] += layers[u].activation_bytes;
    diff[reach[u]] -= layers[u].activation_bytes;
  }
  std::vector<double> cut(n);
  double run = 0;
  for (int b = 0; b < n; ++b) cut[b] = (run += diff[b]);
  if (n > 0) cut[n - 1] = 0;  // nothing leaves the last layer
  return cut;
}

double Profile::CutBytes(int last) const {
  DAPPLE_CHECK(last >= 0 && last < num_layers(), "Profile::CutBytes: layer out of range");
  if (cut_cache_.size() != layers.size() || cut_cache_edges_ != edges.size()) {
    cut_cache_ = AllCutBytes();
    cut_cache_edges_ = edges.size();
  }
  return cut_cache_[last];
}

namespace {

void CheckNumber(double v, const std::string& source, int layer, const char* field) {
  if (!std::isfinite(v) || v < 0)
    ThrowInput("{}: layers[{}].{}: must be a finite number >= 0 (got {})", source, layer, field, v);
}

// The model input's and the data's bytes (Note [Data in the memory figure] in profile.h).
void CheckModelBytes(const Profile& p, const std::string& source) {
  for (auto [name, value] :
       {std::pair{"input_bytes", p.input_bytes}, std::pair{"data_input_bytes", p.data_input_bytes},
        std::pair{"data_target_bytes", p.data_target_bytes}}) {
    if (!std::isfinite(value) || value < 0)
      ThrowInput("{}: {}: must be a finite number >= 0 (got {})", source, name, value);
  }
}

}  // namespace

void ValidateProfile(const Profile& p, const std::string& source) {
  if (p.batch_size <= 0)
    ThrowInput("{}: batch_size: must be positive (got {})", source, p.batch_size);
  if (p.layers.empty()) ThrowInput("{}: layers: the profile has no layers", source);
  CheckModelBytes(p, source);
  for (size_t k = 0; k < p.batch_sizes.size(); ++k) {
    if (p.batch_sizes[k] <= 0)
      ThrowInput("{}: batch_sizes[{}]: must be positive (got {})", source, k, p.batch_sizes[k]);
    if (k > 0 && p.batch_sizes[k] <= p.batch_sizes[k - 1])
      ThrowInput("{}: batch_sizes[{}]: must be ascending ({} after {})", source, k,
                 p.batch_sizes[k], p.batch_sizes[k - 1]);
  }
  std::set<std::string> ids;
  for (int i = 0; i < p.num_layers(); ++i) {
    const LayerProfile& l = p.layers[i];
    if (l.id.empty()) ThrowInput("{}: layers[{}].id: must not be empty", source, i);
    if (!ids.insert(l.id).second)
      ThrowInput("{}: layers[{}].id: '{}' is not unique", source, i, l.id);
    CheckNumber(l.forward_ms, source, i, "forward_ms");
    CheckNumber(l.backward_ms, source, i, "backward_ms");
    CheckNumber(l.activation_bytes, source, i, "activation_bytes");
    CheckNumber(l.parameter_bytes, source, i, "parameter_bytes");
    CheckNumber(l.update_ms, source, i, "update_ms");
    if (!std::isfinite(l.saved_bytes))
      ThrowInput("{}: layers[{}].saved_bytes: must be finite", source, i);
    if ((l.backward_input_ms >= 0) != (l.backward_weight_ms >= 0))
      ThrowInput(
          "{}: layers[{}].{}: missing (backward_input_ms and backward_weight_ms go "
          "together)",
          source, i, l.backward_input_ms >= 0 ? "backward_weight_ms" : "backward_input_ms");
    if (l.has_backward_split()) {
      CheckNumber(l.backward_input_ms, source, i, "backward_input_ms");
      CheckNumber(l.backward_weight_ms, source, i, "backward_weight_ms");
    } else if (!l.backward_input_ms_by_batch.empty() || !l.backward_weight_ms_by_batch.empty()) {
      ThrowInput(
          "{}: layers[{}]: backward_*_ms_by_batch without backward_input_ms and "
          "backward_weight_ms",
          source, i);
    }
    const std::pair<const std::vector<double>*, const char*> lists[] = {
        {&l.forward_ms_by_batch, "forward_ms_by_batch"},
        {&l.backward_ms_by_batch, "backward_ms_by_batch"},
        {&l.backward_input_ms_by_batch, "backward_input_ms_by_batch"},
        {&l.backward_weight_ms_by_batch, "backward_weight_ms_by_batch"}};
    for (const auto& [v, field] : lists) {
      if (!v->empty() && v->size() != p.batch_sizes.size())
        ThrowInput("{}: layers[{}].{}: has {} values but batch_sizes has {}", source, i, field,
                   v->size(), p.batch_sizes.size());
      for (double x : *v) CheckNumber(x, source, i, field);
    }
  }
  // Totals must stay finite too, or the cost model's prefix sums would turn into inf - inf.
  double totals[5] = {0, 0, 0, 0, 0};
  for (const LayerProfile& l : p.layers) {
    totals[0] += l.forward_ms + l.backward_ms + std::max(0.0, l.backward_input_ms) +
                 std::max(0.0, l.backward_weight_ms);
    totals[4] += l.update_ms;
    totals[1] += l.activation_bytes + std::max(0.0, l.saved_bytes);
    totals[2] += l.parameter_bytes;
    for (size_t k = 0; k < l.forward_ms_by_batch.size(); ++k) totals[3] += l.forward_ms_by_batch[k];
    for (const auto* v :
         {&l.backward_ms_by_batch, &l.backward_input_ms_by_batch, &l.backward_weight_ms_by_batch})
      for (double x : *v) totals[3] += x;
  }
  for (double t : totals)
    if (!std::isfinite(t))
      ThrowInput("{}: layers: the values add up beyond the range of double", source);
  for (size_t e = 0; e < p.edges.size(); ++e) {
    auto [from, to] = p.edges[e];
    if (from < 0 || to >= p.num_layers() || from >= to)
      ThrowInput(
          "{}: edges[{}]: {} -> {} must join two layers with the source first (layers are in "
          "topological order, 0..{})",
          source, e, from, to, p.num_layers() - 1);
  }
}

Profile LoadProfile(const std::filesystem::path& path, std::optional<int> pbs) {
  std::string text = format_internal::ReadTextFile(path.string());
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i < text.size() && text[i] == '{') {
    Profile p = ParseProfileJson(text, path.string());
    if (pbs) {
      p.batch_size = *pbs;
      ValidateProfile(p, path.string());
    }
    return p;
  }
  if (!pbs) pbs = PbsFromFileName(path);
  if (!pbs)
    ThrowInput("{}: the profile batch size is unknown: pass --pbs N (or name the file *-pbs-N.txt)",
               path.string());
  return ParsePipeDreamGraph(text, path.string(), *pbs);
}

}  // namespace dapple
