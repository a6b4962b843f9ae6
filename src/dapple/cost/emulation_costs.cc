// The emulation block's charges (emulation_costs.h).
#include "dapple/cost/emulation_costs.h"

#include <algorithm>

#include "dapple/common/error.h"

namespace dapple {

ClusterEmulationCosts::ClusterEmulationCosts(const Cluster& cluster)
    : emulation_(cluster.emulation.value_or(Emulation{})) {
  DAPPLE_CHECK(cluster.emulation.has_value(),
               "ClusterEmulationCosts: the cluster emulates nothing");
  for (int d = 0; d < cluster.num_devices(); ++d) server_of_.push_back(cluster.ServerOf(d));
  auto rate = [](const LinkSpec& l) {
    return std::min(1.0, l.AllReduceBandwidth() / l.bandwidth_bytes_per_s);
  };
  intra_allreduce_rate_ = rate(cluster.intra_server);
  inter_allreduce_rate_ = rate(cluster.inter_server);
}

// A stream per piece of the split-concat (max of the replica counts), over the slower link
// kind the transfer uses.
double ClusterEmulationCosts::TransferLoad(const std::vector<int>& from,
                                           const std::vector<int>& to) const {
  bool crosses = false;
  for (int a : from)
    for (int b : to) crosses = crosses || server_of_.at(a) != server_of_.at(b);
  const double load =
      crosses ? emulation_.inter_server_stream_load : emulation_.intra_server_stream_load;
  return load * static_cast<double>(std::max(from.size(), to.size()));
}

// A ring of r ranks runs r streams at once, each sending at the allreduce's bus bandwidth
// (every rank sends 2(r-1)/r of the bytes in the time that takes). The compute a link's stream
// takes from the devices was measured at its point-to-point bandwidth; a slower stream is
// charged in proportion. This is a fit, not the allreduce's CPU use (which is larger).
// Charged as r full streams, plans whose buckets overlap the backward came out too slow, so
// under contention the backward loses less than that; how the cores are split (the buckets
// presumably take longer) is not modelled and not yet measured (docs/two-server.md).
double ClusterEmulationCosts::AllReduceLoad(const std::vector<int>& devices) const {
  if (devices.size() <= 1) return 0;
  bool spans = false;
  for (int d : devices) spans = spans || server_of_.at(d) != server_of_.at(devices[0]);
  const double load =
      spans ? emulation_.inter_server_stream_load : emulation_.intra_server_stream_load;
  const double rate = spans ? inter_allreduce_rate_ : intra_allreduce_rate_;
  return load * static_cast<double>(devices.size()) * rate;
}

}  // namespace dapple
