// The split-concat transfer of docs/design.md section 4: sender replica j owns the j-th
// contiguous slice of the micro-batch, receiver replica k needs the k-th slice of the next
// stage's split, and each receiver gets the overlapping sample ranges from the senders.
#include <algorithm>
#include <cmath>
#include <vector>

#include "dapple/common/error.h"
#include "dapple/common/slicing.h"
#include "dapple/cost/analytic_cost_model.h"

namespace dapple {

namespace {

// Per-thread buffers of SplitConcatMs, so that the planners' millions of calls allocate
// nothing (the model is shared between threads, so they cannot be members).
// Per server, only the entries of the servers a call touched are non-zero between calls
// (it resets them), so that a call costs O(senders + receivers), not O(servers).
// The messages of a split-concat depend on the micro-batch and both device lists, not on
// the layer: the last call's are kept, as the planner's DP asks for the same devices at many
// layers in a row. The bytes are then summed exactly as the walk would (same order).
struct Message {
  int64_t samples;
  int src, dst;  // servers
  int k;         // the receiver replica
};
struct Scratch {
  std::vector<double> intra, out, in;
  std::vector<char> intra_used, out_used, in_used;
  std::vector<int> touched;  // servers with out_used or in_used set
  uint64_t model = 0;        // the messages' model (its serial), micro-batch, senders and
  int64_t m = -1;            // receivers
  std::vector<int> from, to;
  std::vector<Message> messages;
};

}  // namespace

TransferCost AnalyticCostModel::Transfer(int last, double micro_batch, const std::vector<int>& from,
                                         const std::vector<int>& to) const {
  TransferCost cost;
  cost.ms = SplitConcatMs(last, micro_batch, from, to, &cost.resources);
  return cost;
}

double AnalyticCostModel::TransferMs(int last, double micro_batch, const std::vector<int>& from,
                                     const std::vector<int>& to) const {
  return SplitConcatMs(last, micro_batch, from, to, nullptr);
}

double AnalyticCostModel::SplitConcatMs(int last, double micro_batch, const std::vector<int>& from,
                                        const std::vector<int>& to,
                                        std::vector<int>* resources) const {
  DAPPLE_CHECK(last >= 0 && last < num_layers(), "layer out of range");
  DAPPLE_CHECK(!from.empty() && !to.empty(), "a transfer needs senders and receivers");
  const int nd = num_devices();  // once: a virtual call per device shows on 8192 devices
  for (int d : from) DAPPLE_CHECK(d >= 0 && d < nd, "sender out of range");
  for (int d : to) DAPPLE_CHECK(d >= 0 && d < nd, "receiver out of range");
  const int64_t m = std::llround(micro_batch);
  if (m <= 0) return 0;
  const double bytes_per_sample = cut_bytes_[last] / profile_.batch_size;
  const int rf = static_cast<int>(from.size()), rt = static_cast<int>(to.size());
  const int servers = cluster_.num_servers();

  thread_local Scratch sc;
  sc.intra.assign(rt, 0.0);
  sc.intra_used.assign(rt, 0);
  if (static_cast<int>(sc.out.size()) < servers) {
    sc.out.resize(servers, 0.0);
    sc.in.resize(servers, 0.0);
    sc.out_used.resize(servers, 0);
    sc.in_used.resize(servers, 0);
  }
  sc.touched.clear();
  if (serial_ != sc.model || m != sc.m || from != sc.from || to != sc.to) {
    sc.model = serial_;
    sc.m = m;
    sc.from = from;
    sc.to = to;
    sc.messages.clear();
    // Both splits are ordered sample ranges: walk them together, O(rf + rt) pairs.
    for (int j = 0, k = 0; j < rf && k < rt;) {
      SampleRange a = SliceOf(m, rf, j), b = SliceOf(m, rt, k);
      int64_t samples = Overlap(a, b);
      if (samples > 0 && from[j] != to[k])  // a replica feeding itself moves nothing
        sc.messages.push_back({samples, server_of_[from[j]], server_of_[to[k]], k});
      if (a.end <= b.end) ++j;
      if (b.end <= a.end) ++k;
    }
  }
  const bool any_message = !sc.messages.empty();
  bool crosses = false;
  for (const Message& msg : sc.messages) {
    double bytes = msg.samples * bytes_per_sample;
    const int src = msg.src, dst = msg.dst;
    if (src == dst) {
      sc.intra[msg.k] += bytes;
      sc.intra_used[msg.k] = 1;
    } else {
      crosses = true;
      if (!sc.out_used[src] && !sc.in_used[src]) sc.touched.push_back(src);
      if (!sc.out_used[dst] && !sc.in_used[dst] && dst != src) sc.touched.push_back(dst);
      sc.out[src] += bytes;
      sc.in[dst] += bytes;
      sc.out_used[src] = sc.in_used[dst] = 1;
    }
  }
  const LinkSpec& intra_link = cluster_.intra_server;
  const LinkSpec& inter_link = cluster_.inter_server;
  double seconds = 0;
  for (int s : sc.touched) {
    seconds = std::max(seconds, sc.out[s] / inter_link.bandwidth_bytes_per_s);
    seconds = std::max(seconds, sc.in[s] / inter_link.bandwidth_bytes_per_s);
    if (resources && sc.out_used[s]) resources->push_back(2 * s);
    if (resources && sc.in_used[s]) resources->push_back(2 * s + 1);
    sc.out[s] = sc.in[s] = 0;
    sc.out_used[s] = sc.in_used[s] = 0;
  }
  if (!any_message) return 0;
  for (int k = 0; k < rt; ++k) {
    seconds = std::max(seconds, sc.intra[k] / intra_link.bandwidth_bytes_per_s);
    if (resources && sc.intra_used[k]) resources->push_back(2 * servers + to[k]);
  }
  seconds += crosses ? inter_link.latency_s : intra_link.latency_s;
  if (resources) {
    std::sort(resources->begin(), resources->end());
    resources->erase(std::unique(resources->begin(), resources->end()), resources->end());
  }
  return seconds * 1e3;
}

}  // namespace dapple
