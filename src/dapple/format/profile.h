// A model's layer profile (docs/design.md section 8): per-layer compute times, activation and
// parameter sizes at a profile batch size, and the layer graph. Readers for the profile
// JSON (`dapple-profile/1`) and PipeDream graph text.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dapple/common/machine.h"
#include "dapple/common/precision.h"

namespace dapple {

struct LayerProfile {
  std::string id;    // unique ("node5" in PipeDream text)
  std::string name;  // description; may repeat
  double forward_ms = 0;
  double backward_ms = 0;
  double activation_bytes = 0;  // output activation at the profile batch size
  double parameter_bytes = 0;
  // Bytes this layer saves for its backward at the profile batch size; < 0 when unknown
  // (the cost model then uses activation_bytes).
  double saved_bytes = -1;
  // One optimizer update of this layer's parameters (ms, independent of the batch size);
  // 0 when not measured (PipeDream text has none). The optimizer is in Profile::metadata.
  double update_ms = 0;
  // The backward split as the zb schedules run it (both < 0 when not measured): the input
  // gradient with the graph kept, then the weight gradients. Their sum is about
  // backward_ms, usually a little more (two passes of autograd instead of one).
  double backward_input_ms = -1;
  double backward_weight_ms = -1;
  bool has_backward_split() const { return backward_input_ms >= 0 && backward_weight_ms >= 0; }
  // Optional, aligned with Profile::batch_sizes (both empty or both that size).
  std::vector<double> forward_ms_by_batch;
  std::vector<double> backward_ms_by_batch;
  std::vector<double> backward_input_ms_by_batch;   // only with the split
  std::vector<double> backward_weight_ms_by_batch;  // only with the split
};

// How a profile was measured (JSON `settings`, optional; `dapple profile` writes it), so
// that `plan` and `simulate` can name a mismatch with the cluster's devices
// (format/settings.h).
struct ProfileSettings {
  int threads = 0;               // compute threads of the profiling process
  std::vector<int> batch_sizes;  // the batch sizes timed, ascending
  std::string optimizer;         // whose update update_ms timed: sgd, adam, adamw
  bool cold_caches = false;      // every timed op followed a 64 MiB write
  MachineIdentity machine;       // where it was measured
};

struct Profile {
  std::string model;
  std::string device;  // free text: "V100", "cpu: Intel Xeon ..., 2 threads"
  int batch_size = 0;  // profile batch size (PBS), > 0
  // The compute precision the times and activation bytes were measured with (`dapple
  // profile --precision`, Note [Mixed precision]); plans made from the profile record it.
  // JSON `precision`, float32 when absent (older files), written when not float32.
  Precision precision = Precision::kFloat32;
  // The model input the first stage receives and holds per micro-batch beside its layers'
  // outputs, at the profile batch size (JSON `input_bytes`, `dapple profile` writes it); 0
  // when not recorded, as in PipeDream text, whose input nodes are layers.
  double input_bytes = 0;
  // Note [Data in the memory figure]: the training data a rank of the first stage holds (the
  // inputs of every sample) and one of the last stage (the targets), as the data set is
  // loaded for `dapple train` (JSON `data_input_bytes` and `data_target_bytes`; `dapple
  // profile --data` writes them). A rank keeps its part of the data set in memory beside
  // its stage for the whole run; 0 when not recorded.
  double data_input_bytes = 0;
  double data_target_bytes = 0;
  // Layers in a topological order; index = position in this vector.
  std::vector<LayerProfile> layers;
  // Edges (from, to) as layer indices, from < to. Empty means a chain 0 -> 1 -> ... -> N-1.
  std::vector<std::pair<int, int>> edges;
  // Optional batch sizes at which each layer's *_by_batch times were measured, ascending.
  std::vector<int> batch_sizes;
  // Free-form facts about the measurement (threads, blas kernel, libtorch version, ...).
  std::map<std::string, std::string> metadata;
  std::optional<ProfileSettings> settings;

  int num_layers() const { return static_cast<int>(layers.size()); }
  // Index of the layer with this id, or -1.
  int IndexOf(const std::string& id) const;
  // Bytes crossing the boundary after layer `last` (0 <= last < N-1) at the profile batch
  // size: the sum of activation_bytes over layers <= last with an edge to a layer > last.
  // For a chain: activation_bytes of `last`; 0 after the last layer. O(N + E) on first
  // call, cached after (the cache is rebuilt when the number of layers or edges changes;
  // code that edits sizes or edges in place should use AllCutBytes). Not thread-safe on
  // first call: copy AllCutBytes() where threads share a profile.
  double CutBytes(int last) const;
  // CutBytes for every layer, computed afresh in O(N + E).
  std::vector<double> AllCutBytes() const;

 private:
  mutable std::vector<double> cut_cache_;
  mutable size_t cut_cache_edges_ = 0;
};

// Checks a profile's invariants; throws InputError naming `source` and the layer/field.
// Unique ids, non-negative finite numbers (update_ms included), edges from < to within
// range, batch_size > 0, *_by_batch aligned with batch_sizes, backward_input_ms and
// backward_weight_ms both given or neither (their _by_batch lists only with them).
void ValidateProfile(const Profile& p, const std::string& source);

// Reads a `dapple-profile/1` JSON file. Throws InputError naming file and field.
Profile ReadProfileJson(const std::filesystem::path& path);
// Parses profile JSON held in memory; `source` names it in errors. (Also the fuzz entry.)
Profile ParseProfileJson(const std::string& text, const std::string& source);
void WriteProfileJson(const Profile& p, const std::filesystem::path& path);  // atomic
std::string ProfileToJsonText(const Profile& p);

// Reads PipeDream graph text (docs/design.md section 8). The profile batch size is `pbs` when
// given, else `-pbs-N` in the file name, else an InputError asking for --pbs. Errors name
// the file and line.
Profile ReadPipeDreamGraph(const std::filesystem::path& path, std::optional<int> pbs);
// Parses graph text held in memory; `source` names it in errors. (Also the fuzz entry.)
Profile ParsePipeDreamGraph(const std::string& text, const std::string& source, int pbs);
void WritePipeDreamGraph(const Profile& p, const std::filesystem::path& path);  // atomic
// The graph text of `p`: every layer in order, then every edge (a chain's edges when
// p.edges is empty). Newlines and " -- " in names are replaced so the text parses back.
std::string PipeDreamGraphText(const Profile& p);
// The `-pbs-N` in a profile file name ("bert-48-pbs-2.txt" -> 2), if any.
std::optional<int> PbsFromFileName(const std::filesystem::path& path);

// Reads either format, chosen by content (JSON starts with '{'). `pbs` overrides the
// profile batch size when given.
Profile LoadProfile(const std::filesystem::path& path, std::optional<int> pbs = std::nullopt);

}  // namespace dapple
