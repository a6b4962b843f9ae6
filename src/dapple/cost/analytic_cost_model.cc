// The reference cost model (docs/design.md section 4): compute from prefix sums (interpolated
// over batch size when the profile has several), memory, ring allreduce. The split-concat
// transfer is in split_concat.cc.
#include "dapple/cost/analytic_cost_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "dapple/common/error.h"
#include "dapple/format/cluster_kinds.h"

namespace dapple {

namespace {

uint64_t NextSerial() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

// Cluster::Device without its O(servers) scan (the planners ask per device, millions of
// times on clusters of 1024 servers): the server from the table the model keeps.
const DeviceSpec& SpecOf(const Cluster& c, const std::vector<int>& server_of, int device) {
  const ServerSpec& s = c.servers[server_of[device]];
  return s.device ? *s.device : c.device;
}

std::vector<double> Prefix(const std::vector<LayerProfile>& layers,
                           double (*value)(const LayerProfile&)) {
  std::vector<double> prefix(layers.size() + 1, 0.0);
  for (size_t i = 0; i < layers.size(); ++i) prefix[i + 1] = prefix[i] + value(layers[i]);
  return prefix;
}

// Which time of a layer a prefix sums: its forward, backward, or one part of the backward.
enum class Part { kForward, kBackward, kInput, kWeight };

// The layer's weight-gradient share of its backward when the profile has no split.
double WeightShare(const LayerProfile& l, double share) {
  return l.parameter_bytes > 0 ? share : 0.0;
}

double AtPbs(const LayerProfile& l, Part part, double share) {
  switch (part) {
    case Part::kForward:
      return l.forward_ms;
    case Part::kBackward:
      return l.backward_ms;
    case Part::kInput:
      return l.has_backward_split() ? l.backward_input_ms
                                    : l.backward_ms * (1 - WeightShare(l, share));
    case Part::kWeight:
      return l.has_backward_split() ? l.backward_weight_ms : l.backward_ms * WeightShare(l, share);
  }
  return 0;
}

// The layer's time at batch_sizes[k]: measured, else derived as at the profile batch size
// (the split from the measured backward at k, else the PBS value scaled linearly).
double AtBatch(const Profile& p, const LayerProfile& l, Part part, size_t k, double share) {
  auto scaled = [&] { return AtPbs(l, part, share) * p.batch_sizes[k] / p.batch_size; };
  switch (part) {
    case Part::kForward:
      return l.forward_ms_by_batch.empty() ? scaled() : l.forward_ms_by_batch[k];
    case Part::kBackward:
      return l.backward_ms_by_batch.empty() ? scaled() : l.backward_ms_by_batch[k];
    case Part::kInput:
    case Part::kWeight: {
      const auto& by =
          part == Part::kInput ? l.backward_input_ms_by_batch : l.backward_weight_ms_by_batch;
      if (!by.empty()) return by[k];
      if (l.has_backward_split() || l.backward_ms_by_batch.empty()) return scaled();
      const double w = WeightShare(l, share);
      return l.backward_ms_by_batch[k] * (part == Part::kInput ? 1 - w : w);
    }
  }
  return 0;
}

std::vector<double> PrefixOf(const Profile& p, Part part, double share) {
  std::vector<double> prefix(p.layers.size() + 1, 0.0);
  for (size_t i = 0; i < p.layers.size(); ++i)
    prefix[i + 1] = prefix[i] + AtPbs(p.layers[i], part, share);
  return prefix;
}

// Prefix sums of every layer's time at each of batch_sizes.
std::vector<std::vector<double>> PrefixByBatch(const Profile& p, Part part, double share) {
  std::vector<std::vector<double>> out;
  for (size_t k = 0; k < p.batch_sizes.size(); ++k) {
    std::vector<double> prefix(p.layers.size() + 1, 0.0);
    for (size_t i = 0; i < p.layers.size(); ++i)
      prefix[i + 1] = prefix[i] + AtBatch(p, p.layers[i], part, k, share);
    out.push_back(std::move(prefix));
  }
  return out;
}

}  // namespace

AnalyticCostModel::AnalyticCostModel(const Profile& profile, const Cluster& cluster,
                                     CostOptions options)
    : profile_(profile), cluster_(cluster), options_(options), serial_(NextSerial()) {
  ValidateProfile(profile, "profile");
  ValidateCluster(cluster, "cluster");
  if (!(options.allreduce_bucket_bytes > 0))
    ThrowInput("the allreduce bucket size must be positive, got {} bytes",
               options.allreduce_bucket_bytes);
  if (!(options.weight_grad_share >= 0 && options.weight_grad_share <= 1))
    ThrowInput("the weight-gradient share of the backward must be in [0, 1], got {}",
               options.weight_grad_share);
  const double share = options.weight_grad_share;
  fwd_prefix_ = PrefixOf(profile, Part::kForward, share);
  bwd_prefix_ = PrefixOf(profile, Part::kBackward, share);
  bwd_in_prefix_ = PrefixOf(profile, Part::kInput, share);
  bwd_w_prefix_ = PrefixOf(profile, Part::kWeight, share);
  param_prefix_ = Prefix(profile.layers, [](const LayerProfile& l) { return l.parameter_bytes; });
  saved_prefix_ = Prefix(profile.layers, [](const LayerProfile& l) {
    return l.saved_bytes >= 0 ? l.saved_bytes : l.activation_bytes;
  });
  update_prefix_ = Prefix(profile.layers, [](const LayerProfile& l) { return l.update_ms; });
  fwd_prefix_by_batch_ = PrefixByBatch(profile, Part::kForward, share);
  bwd_prefix_by_batch_ = PrefixByBatch(profile, Part::kBackward, share);
  bwd_in_prefix_by_batch_ = PrefixByBatch(profile, Part::kInput, share);
  bwd_w_prefix_by_batch_ = PrefixByBatch(profile, Part::kWeight, share);
  // Cut sizes once, here, so concurrent callers (a parallel planner) only read.
  cut_bytes_ = profile.AllCutBytes();
  num_layers_ = profile.num_layers();
  for (int d = 0; d < cluster.num_devices(); ++d) server_of_.push_back(cluster.ServerOf(d));
  kind_ = KindOfEachDevice(cluster);
  if (cluster.emulation) emulation_.emplace(cluster);
}

int AnalyticCostModel::num_layers() const { return profile_.num_layers(); }
int AnalyticCostModel::num_devices() const { return static_cast<int>(server_of_.size()); }
int AnalyticCostModel::profile_batch_size() const { return profile_.batch_size; }

void AnalyticCostModel::RangeOutOfBounds(int first, int last) const {
  DAPPLE_CHECK(0 <= first && first <= last && last < num_layers(), "layer range out of bounds");
  throw Error("internal error: CheckRange");  // not reached: the check above failed
}

double AnalyticCostModel::ComputeMs(const std::vector<double>& prefix,
                                    const std::vector<std::vector<double>>& by_batch, int first,
                                    int last, double samples, int device) const {
  CheckRange(first, last);
  DAPPLE_CHECK(device >= 0 && device < num_devices(), "device out of range");
  if (samples <= 0) return 0;
  double ms;
  const std::vector<int>& sizes = profile_.batch_sizes;
  if (sizes.empty()) {
    ms = (prefix[last + 1] - prefix[first]) * samples / profile_.batch_size;
  } else if (sizes.size() == 1) {
    ms = (by_batch[0][last + 1] - by_batch[0][first]) * samples / sizes[0];
  } else {
    // Piecewise-linear in the batch size, extrapolated from the nearest two measurements.
    size_t hi = std::upper_bound(sizes.begin(), sizes.end(), samples) - sizes.begin();
    hi = std::clamp<size_t>(hi, 1, sizes.size() - 1);
    size_t lo = hi - 1;
    double y0 = by_batch[lo][last + 1] - by_batch[lo][first];
    double y1 = by_batch[hi][last + 1] - by_batch[hi][first];
    double t = (samples - sizes[lo]) / (sizes[hi] - sizes[lo]);
    ms = std::max(0.0, y0 + t * (y1 - y0));
  }
  return ms / SpecOf(cluster_, server_of_, device).speed;
}

double AnalyticCostModel::ForwardMs(int first, int last, double samples, int device) const {
  return ComputeMs(fwd_prefix_, fwd_prefix_by_batch_, first, last, samples, device);
}

double AnalyticCostModel::BackwardMs(int first, int last, double samples, int device) const {
  return ComputeMs(bwd_prefix_, bwd_prefix_by_batch_, first, last, samples, device);
}

double AnalyticCostModel::BackwardInputMs(int first, int last, double samples, int device) const {
  return ComputeMs(bwd_in_prefix_, bwd_in_prefix_by_batch_, first, last, samples, device);
}

double AnalyticCostModel::BackwardWeightMs(int first, int last, double samples, int device) const {
  return ComputeMs(bwd_w_prefix_, bwd_w_prefix_by_batch_, first, last, samples, device);
}

double AnalyticCostModel::CutBytes(int last, double samples) const {
  DAPPLE_CHECK(last >= 0 && last < num_layers(), "layer out of range");
  return cut_bytes_[last] * samples / profile_.batch_size;
}

double AnalyticCostModel::UpdateMs(int first, int last, int device) const {
  CheckRange(first, last);
  DAPPLE_CHECK(device >= 0 && device < num_devices(), "device out of range");
  return (update_prefix_[last + 1] - update_prefix_[first]) /
         SpecOf(cluster_, server_of_, device).speed;
}

// Note [Rings asked again]
// The planners ask the allreduce of the same devices for many layer ranges in a row (a
// stage's gradient buckets, the DP's and PipeDream's stages at every block), and a ring
// may hold 8192 devices. So the last two calls' devices and the answers of the scan (in
// range, spanning servers or not) are kept per thread; a call with equal devices compares
// them (a memcmp) instead of scanning them again. The figure is the same either way.
bool AnalyticCostModel::RingSpansServers(const std::vector<int>& devices) const {
  struct KeptRing {
    uint64_t model = 0;
    std::vector<int> devices;
    bool spans = false;
  };
  // The last two rings: the DP asks a new stage's and the head stage's in turn.
  thread_local KeptRing kept[2];
  thread_local int older = 0;
  for (const KeptRing& k : kept)
    if (k.model == serial_ && k.devices == devices) return k.spans;
  // Devices are numbered server by server, so the ring stays inside one server exactly
  // when its lowest and highest device do (a min and max over the ids, without a lookup
  // per device), in four independent lanes.
  const int* d = devices.data();
  const size_t r = devices.size();
  int lo[4] = {d[0], d[0], d[0], d[0]}, hi[4] = {d[0], d[0], d[0], d[0]};
  size_t i = 0;
  for (; i + 4 <= r; i += 4)
    for (int q = 0; q < 4; ++q) {
      lo[q] = std::min(lo[q], d[i + q]);
      hi[q] = std::max(hi[q], d[i + q]);
    }
  for (; i < r; ++i) {
    lo[0] = std::min(lo[0], d[i]);
    hi[0] = std::max(hi[0], d[i]);
  }
  const int min_id = std::min(std::min(lo[0], lo[1]), std::min(lo[2], lo[3]));
  const int max_id = std::max(std::max(hi[0], hi[1]), std::max(hi[2], hi[3]));
  DAPPLE_CHECK(min_id >= 0 && max_id < num_devices(), "device out of range");
  KeptRing& k = kept[older];
  older = 1 - older;
  k.model = serial_;
  k.devices = devices;
  k.spans = server_of_[min_id] != server_of_[max_id];
  return k.spans;
}

AnalyticCostModel::Ring AnalyticCostModel::RingOf(const std::vector<int>& devices) const {
  const int r = static_cast<int>(devices.size());
  const bool spans = RingSpansServers(devices);  // Note [Rings asked again]
  // The slowest link of the ring: the inter-server one as soon as the ring leaves a server
  // (the slower of both kinds, as the ring also has hops inside servers).
  const LinkSpec& intra = cluster_.intra_server;
  const LinkSpec& inter = cluster_.inter_server;
  Ring ring;
  ring.bandwidth = spans ? std::min(intra.AllReduceBandwidth(), inter.AllReduceBandwidth())
                         : intra.AllReduceBandwidth();
  const double latency = spans ? std::max(intra.AllReduceLatency(), inter.AllReduceLatency())
                               : intra.AllReduceLatency();
  ring.per_byte_share = 2.0 * (r - 1) / r;
  ring.latency_term = 2.0 * (r - 1) * latency;
  return ring;
}

double AnalyticCostModel::ScalarAllReduceMs(const std::vector<int>& devices) const {
  if (devices.size() <= 1) return 0;
  return RingMs(RingOf(devices), sizeof(double));
}

double AnalyticCostModel::AllReduceMs(int first, int last, const std::vector<int>& devices) const {
  CheckRange(first, last);
  if (devices.size() <= 1) return 0;
  return RingMs(RingOf(devices), param_prefix_[last + 1] - param_prefix_[first]);
}

void AnalyticCostModel::AllReduceMsFrom(std::span<const int> firsts, int last,
                                        const std::vector<int>& devices, double* out) const {
  for (int first : firsts) CheckRange(first, last);
  if (devices.size() <= 1) {
    std::fill(out, out + firsts.size(), 0.0);
    return;
  }
  const Ring ring = RingOf(devices);
  for (size_t j = 0; j < firsts.size(); ++j)
    out[j] = RingMs(ring, param_prefix_[last + 1] - param_prefix_[firsts[j]]);
}

double WeightCopyFactor(Precision p) { return p == Precision::kBf16 ? 0.5 : 0.0; }

double AnalyticCostModel::ParameterBytes(int first, int last) const {
  CheckRange(first, last);
  return param_prefix_[last + 1] - param_prefix_[first];
}

double AnalyticCostModel::AllReduceBucketBytes() const { return options_.allreduce_bucket_bytes; }

// Note [Mixed precision] (models/mixed_precision.h): a bf16 profile's stage also holds a bf16
// copy of its float32 weights through the step (autocast's cast cache): half a parameter
// byte per parameter byte on every replica, sharded or not.
double AnalyticCostModel::StaticMemoryBytes(int first, int last) const {
  CheckRange(first, last);
  return (param_prefix_[last + 1] - param_prefix_[first]) *
             (options_.state_factor + WeightCopyFactor(profile_.precision)) +
         DataBytes(first, last);
}

// Note [Data in the memory figure] (format/profile.h): the inputs with the first layer, the
// targets with the last.
double AnalyticCostModel::DataBytes(int first, int last) const {
  return (first == 0 ? profile_.data_input_bytes : 0) +
         (last == num_layers() - 1 ? profile_.data_target_bytes : 0);
}

// Weights and gradients whole, the state beyond them 1/r, and the reduce-scatter's receive
// buffers, as large as the gradients at the end of the last backward (Note [Optimizer
// sharding] in runtime/optim/sharded_optimizer.h); never more than unsharded.
double AnalyticCostModel::ShardedStaticMemoryBytes(int first, int last, int replicas) const {
  CheckRange(first, last);
  const double sf = options_.state_factor;
  const double whole = std::min(sf, 2.0);  // weights and gradients
  const double factor = std::min(sf, whole + 1.0 + (sf - whole) / std::max(replicas, 1));
  return (param_prefix_[last + 1] - param_prefix_[first]) *
             (factor + WeightCopyFactor(profile_.precision)) +
         DataBytes(first, last);
}

double AnalyticCostModel::ActivationBytes(int first, int last, double samples) const {
  CheckRange(first, last);
  return (saved_prefix_[last + 1] - saved_prefix_[first]) * samples / profile_.batch_size;
}

double AnalyticCostModel::StageInputBytes(int first, double samples) const {
  DAPPLE_CHECK(first >= 0 && first < num_layers(), "layer out of range");
  // The first stage's input is the model input: the profile's input_bytes (0 for PipeDream
  // profiles, whose input nodes are layers and count among the activations).
  if (first == 0) return profile_.input_bytes * samples / profile_.batch_size;
  return CutBytes(first - 1, samples);
}

double AnalyticCostModel::DeviceMemoryBytes(int device) const {
  DAPPLE_CHECK(device >= 0 && device < num_devices(), "device out of range");
  const double memory = options_.memory_bytes_override > 0
                            ? options_.memory_bytes_override
                            : SpecOf(cluster_, server_of_, device).memory_bytes;
  // An override below the process's own leaves the stage nothing.
  return std::max(0.0, memory - ProcessMemoryBytes(device));
}

double AnalyticCostModel::ProcessMemoryBytes(int device) const {
  DAPPLE_CHECK(device >= 0 && device < num_devices(), "device out of range");
  return SpecOf(cluster_, server_of_, device).process_memory_bytes;
}

// Per device, the first device alike in speed, memory and process memory (servers are
// alike inside: one comparison per server and kind seen before).
std::vector<int> AnalyticCostModel::KindOfEachDevice(const Cluster& c) {
  std::vector<int> kinds, firsts;              // firsts: the first device of each kind
  std::vector<const DeviceSpec*> first_specs;  // and its spec
  for (int s = 0, d = 0; s < c.num_servers(); d += c.servers[s].devices, ++s) {
    const DeviceSpec& spec = c.servers[s].device ? *c.servers[s].device : c.device;
    int kind = d;
    for (size_t k = 0; k < firsts.size() && kind == d; ++k) {
      const DeviceSpec& f = *first_specs[k];
      if (AlikeDevices(f, spec)) kind = firsts[k];
    }
    if (kind == d) {
      firsts.push_back(d);
      first_specs.push_back(&spec);
    }
    kinds.insert(kinds.end(), c.servers[s].devices, kind);
  }
  return kinds;
}

double AnalyticCostModel::SingleDeviceMs(int global_batch) const {
  const int n = num_layers();
  return (fwd_prefix_[n] + bwd_prefix_[n]) * global_batch / profile_.batch_size;
}

}  // namespace dapple
