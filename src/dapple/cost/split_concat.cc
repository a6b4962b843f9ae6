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

// Per-thread buffers of SplitConcatMs, so that a call allocates nothing once they have grown
// (the model is shared between threads, so they cannot be members).
// Per server, only the entries of the servers a call touched are non-zero between calls
// (it resets them), so that a call costs O(senders + receivers), not O(servers).
//
// Note [Split-concat by link]
// A split-concat's messages depend on the micro-batch and both device lists, not on the
// layer, and the planners' DP asks for the same devices at many layers in a row. So when
// a call has the same devices as the one before, its messages are grouped by the link
// they load (a server's egress or ingress port, a receiver's intra-server link), each
// link's in message order, and kept while the devices stay the same; a call then sums each
// link's bytes in that order, as the walk over the slices adds them, so the figure is the
// same to the last bit, without the walk.
struct Link {
  int resource;       // Transfer's resource id: 2s, 2s + 1 or 2 x servers + device
  bool inter;         // between servers (else inside one)
  size_t begin, end;  // its messages' samples: Scratch::samples[begin, end)
};

// Note [Split-concat by server runs]
// When a layer's bytes per sample are a whole number b (and m x b <= 2^53), every
// message's bytes (samples x b) and every sum of them on a link is a whole number below
// 2^53, so the floating-point sums are exact: a link's bytes are (its samples) x b,
// whatever the order of the additions. The time is then the link of most samples of each
// kind (division by the bandwidth is monotone), and depends on the micro-batch and the
// devices only: counted once per device lists, a transfer asked again at another layer
// costs O(1). The count walks runs of devices on one server instead of devices: the
// senders of one run own one contiguous range of samples, so what a run sends to a run
// of receivers on another server is the overlap of two ranges; only runs on the same
// server (a receiver's own intra-server link) are walked device by device. The figure is
// the walk's to the last bit (tests/cost/split_concat_runs_test.cc). TransferMs only:
// Transfer's resources come from the walk or the links above.
struct Run {
  int server;
  int begin, end;  // positions in the device list
};
struct Counts {
  int64_t max_inter = 0, max_intra = 0;  // samples on the busiest link of each kind
  bool crosses = false, any = false;     // a message between servers; any message
};
struct Scratch {
  std::vector<double> intra, out, in;
  std::vector<char> intra_used, out_used, in_used;
  std::vector<int> touched;  // servers with out_used or in_used set
  // The last call's model (its serial), micro-batch, senders and receivers, and whether
  // `links` and `samples` hold their messages by link.
  uint64_t model = 0;
  int64_t m = -1;
  std::vector<int> from, to;
  bool grouped = false;
  bool crosses = false;
  std::vector<Link> links;
  std::vector<int64_t> samples;
  std::vector<std::pair<int64_t, int>> messages;  // while grouping: (samples, link)
  std::vector<int> link_of;  // while grouping: link by resource (-1 between calls)
  std::vector<size_t> fill;
  // Note [Split-concat by server runs]: the counts of the last call's devices, when done.
  bool counted = false;
  Counts counts;
  std::vector<Run> from_runs, to_runs;
  std::vector<int64_t> out_n, in_n, intra_n;  // zero between calls
  std::vector<int> intra_touched;
};

// Whether every id is in [0, nd): the largest as unsigned (negative ones are huge), in
// four independent lanes (this runs for every transfer with devices other than the last's).
bool AllDevicesBelow(const std::vector<int>& devices, int nd) {
  const int* d = devices.data();
  const size_t n = devices.size();
  unsigned top[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int q = 0; q < 4; ++q) top[q] = std::max(top[q], static_cast<unsigned>(d[i + q]));
  for (; i < n; ++i) top[0] = std::max(top[0], static_cast<unsigned>(d[i]));
  return std::max(std::max(top[0], top[1]), std::max(top[2], top[3])) < static_cast<unsigned>(nd);
}

void RunsOf(const std::vector<int>& server_of, const std::vector<int>& devices,
            std::vector<Run>& runs) {
  runs.clear();
  const int n = static_cast<int>(devices.size());
  for (int i = 0; i < n; ++i) {
    const int s = server_of[devices[i]];
    if (runs.empty() || runs.back().server != s)
      runs.push_back({s, i, i + 1});
    else
      runs.back().end = i + 1;
  }
}

// The counts of Note [Split-concat by server runs]; leaves sc's per-server and per-receiver
// sums zero.
Counts CountByRuns(const std::vector<int>& server_of, int servers, int64_t m,
                   const std::vector<int>& from, const std::vector<int>& to, Scratch& sc) {
  const int rf = static_cast<int>(from.size()), rt = static_cast<int>(to.size());
  const int64_t base_f = m / rf, extra_f = m % rf, base_t = m / rt, extra_t = m % rt;
  auto begin_f = [&](int j) -> int64_t { return j * base_f + std::min<int64_t>(j, extra_f); };
  auto begin_t = [&](int k) -> int64_t { return k * base_t + std::min<int64_t>(k, extra_t); };
  RunsOf(server_of, from, sc.from_runs);
  RunsOf(server_of, to, sc.to_runs);
  if (static_cast<int>(sc.out_n.size()) < servers) {
    sc.out_n.resize(servers, 0);
    sc.in_n.resize(servers, 0);
  }
  if (static_cast<int>(sc.intra_n.size()) < rt) sc.intra_n.resize(rt, 0);
  sc.touched.clear();
  sc.intra_touched.clear();
  Counts c;
  const size_t na = sc.from_runs.size(), nb = sc.to_runs.size();
  for (size_t a = 0, b = 0; a < na && b < nb;) {
    const Run& A = sc.from_runs[a];
    const Run& B = sc.to_runs[b];
    const int64_t a0 = begin_f(A.begin), a1 = begin_f(A.end);
    const int64_t b0 = begin_t(B.begin), b1 = begin_t(B.end);
    const int64_t overlap = std::min(a1, b1) - std::max(a0, b0);
    if (overlap > 0 && A.server != B.server) {
      c.crosses = c.any = true;
      if (sc.out_n[A.server] == 0 && sc.in_n[A.server] == 0) sc.touched.push_back(A.server);
      sc.out_n[A.server] += overlap;
      if (sc.out_n[B.server] == 0 && sc.in_n[B.server] == 0) sc.touched.push_back(B.server);
      sc.in_n[B.server] += overlap;
    } else if (overlap > 0) {  // inside one server: the walk, over these runs only
      for (int j = A.begin, k = B.begin; j < A.end && k < B.end;) {
        const int64_t ja = begin_f(j), jb = begin_f(j + 1), ka = begin_t(k), kb = begin_t(k + 1);
        const int64_t samples = std::min(jb, kb) - std::max(ja, ka);
        if (samples > 0 && from[j] != to[k]) {  // feeding itself: no message
          c.any = true;
          if (sc.intra_n[k] == 0) sc.intra_touched.push_back(k);
          sc.intra_n[k] += samples;
        }
        if (jb <= kb) ++j;
        if (kb <= jb) ++k;
      }
    }
    if (a1 <= b1) ++a;
    if (b1 <= a1) ++b;
  }
  for (int s : sc.touched) {
    c.max_inter = std::max({c.max_inter, sc.out_n[s], sc.in_n[s]});
    sc.out_n[s] = sc.in_n[s] = 0;
  }
  for (int k : sc.intra_touched) {
    c.max_intra = std::max(c.max_intra, sc.intra_n[k]);
    sc.intra_n[k] = 0;
  }
  return c;
}

// What one SplitConcatMs call asks, for its helpers.
struct Call {
  const std::vector<int>& server_of;
  int servers = 0, num_devices = 0;
  int64_t m = 0;  // samples per micro-batch
  const std::vector<int>& from;
  const std::vector<int>& to;
  double bytes_per_sample = 0;
  const LinkSpec& intra_link;
  const LinkSpec& inter_link;
  std::vector<int>* resources;  // Transfer's, or null
};

// The busiest link of a transfer: its seconds without the latency, whether a message
// crosses servers, whether there is a message at all.
struct LinkLoad {
  double seconds = 0;
  bool crosses = false;
  bool any = false;
};

// Both splits are ordered sample ranges: walks them together, O(rf + rt) pairs, calling
// message(samples, sender j, receiver k) for each that moves samples (a device feeding
// itself sends none). SliceOf's sizes without its divisions per step: n / parts and
// n % parts once.
template <typename Message>
void WalkSlices(const Call& c, Message&& message) {
  const int rf = static_cast<int>(c.from.size()), rt = static_cast<int>(c.to.size());
  const int64_t base_f = c.m / rf, extra_f = c.m % rf, base_t = c.m / rt, extra_t = c.m % rt;
  auto slice = [](int64_t base, int64_t extra, int part) {
    const int64_t begin = part * base + (part < extra ? part : extra);
    return SampleRange{begin, begin + base + (part < extra ? 1 : 0)};
  };
  for (int j = 0, k = 0; j < rf && k < rt;) {
    SampleRange a = slice(base_f, extra_f, j), b = slice(base_t, extra_t, k);
    int64_t samples = Overlap(a, b);
    if (samples > 0 && c.from[j] != c.to[k]) message(samples, j, k);
    if (a.end <= b.end) ++j;
    if (b.end <= a.end) ++k;
  }
}

// Note [Split-concat by server runs]: whether every message's bytes and their sums are
// whole numbers below 2^53.
bool WholeBytes(const Call& c) {
  return c.bytes_per_sample == std::floor(c.bytes_per_sample) &&
         c.bytes_per_sample * static_cast<double>(c.m) <= 9007199254740992.0;
}

// Note [Split-concat by server runs]: the time from the busiest link of each kind.
double ByRunsMs(const Call& c, const Counts& n) {
  if (!n.any) return 0;
  const double inter =
      static_cast<double>(n.max_inter) * c.bytes_per_sample / c.inter_link.bandwidth_bytes_per_s;
  const double intra =
      static_cast<double>(n.max_intra) * c.bytes_per_sample / c.intra_link.bandwidth_bytes_per_s;
  return (std::max(inter, intra) + (n.crosses ? c.inter_link.latency_s : c.intra_link.latency_s)) *
         1e3;
}

// The walk over the slices, adding up each link's bytes as it goes (per server its egress
// and ingress, per receiver its intra-server link) and the resources of the links used.
LinkLoad WalkLoad(const Call& c, Scratch& sc) {
  const int rt = static_cast<int>(c.to.size());
  sc.intra.assign(rt, 0.0);
  sc.intra_used.assign(rt, 0);
  if (static_cast<int>(sc.out.size()) < c.servers) {
    sc.out.resize(c.servers, 0.0);
    sc.in.resize(c.servers, 0.0);
    sc.out_used.resize(c.servers, 0);
    sc.in_used.resize(c.servers, 0);
  }
  sc.touched.clear();
  LinkLoad load;
  WalkSlices(c, [&](int64_t samples, int j, int k) {
    double bytes = samples * c.bytes_per_sample;
    int src = c.server_of[c.from[j]], dst = c.server_of[c.to[k]];
    load.any = true;
    if (src == dst) {
      sc.intra[k] += bytes;
      sc.intra_used[k] = 1;
    } else {
      load.crosses = true;
      if (!sc.out_used[src] && !sc.in_used[src]) sc.touched.push_back(src);
      if (!sc.out_used[dst] && !sc.in_used[dst] && dst != src) sc.touched.push_back(dst);
      sc.out[src] += bytes;
      sc.in[dst] += bytes;
      sc.out_used[src] = sc.in_used[dst] = 1;
    }
  });
  for (int s : sc.touched) {
    load.seconds = std::max(load.seconds, sc.out[s] / c.inter_link.bandwidth_bytes_per_s);
    load.seconds = std::max(load.seconds, sc.in[s] / c.inter_link.bandwidth_bytes_per_s);
    if (c.resources && sc.out_used[s]) c.resources->push_back(2 * s);
    if (c.resources && sc.in_used[s]) c.resources->push_back(2 * s + 1);
    sc.out[s] = sc.in[s] = 0;
    sc.out_used[s] = sc.in_used[s] = 0;
  }
  if (!load.any) return load;
  for (int k = 0; k < rt; ++k) {
    load.seconds = std::max(load.seconds, sc.intra[k] / c.intra_link.bandwidth_bytes_per_s);
    if (c.resources && sc.intra_used[k]) c.resources->push_back(2 * c.servers + c.to[k]);
  }
  return load;
}

// Note [Split-concat by link]: the call's messages grouped by link into sc.links and
// sc.samples, each link's in the order of the walk.
void GroupByLink(const Call& c, Scratch& sc) {
  sc.grouped = true;
  sc.links.clear();
  sc.messages.clear();
  sc.crosses = false;
  if (sc.link_of.size() < static_cast<size_t>(2 * c.servers + c.num_devices))
    sc.link_of.assign(2 * c.servers + c.num_devices, -1);
  auto add = [&](int64_t samples, int resource, bool inter) {
    int& l = sc.link_of[resource];
    if (l < 0) {
      l = static_cast<int>(sc.links.size());
      sc.links.push_back({resource, inter, 0, 0});
    }
    ++sc.links[l].end;  // a count for now
    sc.messages.emplace_back(samples, l);
  };
  WalkSlices(c, [&](int64_t samples, int j, int k) {
    const int src = c.server_of[c.from[j]], dst = c.server_of[c.to[k]];
    if (src == dst) {
      add(samples, 2 * c.servers + c.to[k], false);
    } else {
      sc.crosses = true;
      add(samples, 2 * src, true);
      add(samples, 2 * dst + 1, true);
    }
  });
  size_t at = 0;
  sc.fill.resize(sc.links.size());
  for (size_t l = 0; l < sc.links.size(); ++l) {
    const size_t count = sc.links[l].end;
    sc.links[l].begin = sc.fill[l] = at;
    sc.links[l].end = at += count;
  }
  sc.samples.resize(at);
  for (const auto& [samples, l] : sc.messages) sc.samples[sc.fill[l]++] = samples;
  for (const Link& l : sc.links) sc.link_of[l.resource] = -1;
}

// Note [Split-concat by link]: each link's bytes summed in the walk's order.
LinkLoad ByLinkLoad(const Call& c, Scratch& sc) {
  if (!sc.grouped) GroupByLink(c, sc);
  LinkLoad load;
  for (const Link& l : sc.links) {
    double bytes = 0;
    for (size_t i = l.begin; i < l.end; ++i) bytes += sc.samples[i] * c.bytes_per_sample;
    const LinkSpec& spec = l.inter ? c.inter_link : c.intra_link;
    load.seconds = std::max(load.seconds, bytes / spec.bandwidth_bytes_per_s);
    if (c.resources) c.resources->push_back(l.resource);
  }
  load.any = !sc.links.empty();
  load.crosses = sc.crosses;
  return load;
}

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

void AnalyticCostModel::TransferMsAt(std::span<const int> lasts, double micro_batch,
                                     const std::vector<int>& from, const std::vector<int>& to,
                                     double* out) const {
  for (size_t j = 0; j < lasts.size(); ++j)
    out[j] = SplitConcatMs(lasts[j], micro_batch, from, to, nullptr, lasts.size() > 1);
}

double AnalyticCostModel::SplitConcatMs(int last, double micro_batch, const std::vector<int>& from,
                                        const std::vector<int>& to, std::vector<int>* resources,
                                        bool group_now) const {
  DAPPLE_CHECK(last >= 0 && last < num_layers(), "layer out of range");
  DAPPLE_CHECK(!from.empty() && !to.empty(), "a transfer needs senders and receivers");
  const int nd = num_devices();  // once per call, not per device: a virtual call
  thread_local Scratch sc;
  // The last call's devices were checked when they were kept.
  const bool same_devices = serial_ == sc.model && from == sc.from && to == sc.to;
  if (!same_devices) {
    DAPPLE_CHECK(AllDevicesBelow(from, nd), "sender out of range");
    DAPPLE_CHECK(AllDevicesBelow(to, nd), "receiver out of range");
  }
  const int64_t m = std::llround(micro_batch);
  if (m <= 0) return 0;
  const Call c{server_of_,
               cluster_.num_servers(),
               nd,
               m,
               from,
               to,
               cut_bytes_[last] / profile_.batch_size,
               cluster_.intra_server,
               cluster_.inter_server,
               resources};
  const bool again = same_devices && m == sc.m;
  if (!again) {
    sc.model = serial_;
    sc.m = m;
    sc.from = from;
    sc.to = to;
    sc.grouped = false;
    sc.counted = false;
  }
  if (!resources && WholeBytes(c)) {
    if (!sc.counted) {
      sc.counts = CountByRuns(server_of_, c.servers, m, from, to, sc);
      sc.counted = true;
    }
    return ByRunsMs(c, sc.counts);
  }
  const LinkLoad load = !again && !group_now ? WalkLoad(c, sc) : ByLinkLoad(c, sc);
  if (!load.any) return 0;
  const double seconds =
      load.seconds + (load.crosses ? c.inter_link.latency_s : c.intra_link.latency_s);
  if (resources) {
    std::sort(resources->begin(), resources->end());
    resources->erase(std::unique(resources->begin(), resources->end()), resources->end());
  }
  return seconds * 1e3;
}

}  // namespace dapple
