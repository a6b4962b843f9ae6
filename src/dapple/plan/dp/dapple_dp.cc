// DAPPLE's DP over an explicit memo table: see dapple_dp.h for the state and transition.
// The recurrence is DpSearch::Run and PrependStage; what it asks of the cost model and the
// caches that answer repeats are DpCosts (dp_costs.h), where a stage goes DpStagePlacer
// (dp_stage_placer.h). tests/plan/dapple_dp_reference_test.cc holds a plain version of the
// same recurrence, without those caches, that this one must equal.
#include "dapple/plan/dp/dapple_dp.h"

#include <algorithm>
#include <span>

#include "dapple/common/error.h"
#include "dapple/plan/dp/dp_costs.h"
#include "dapple/plan/dp/dp_stage_placer.h"
#include "dapple/plan/dp/layer_blocks.h"
#include "dapple/plan/pipeline_latency.h"
#include "dapple/schedule/schedule.h"

namespace dapple {
namespace {

using internal::DpCosts;
using internal::DpStagePlacer;
using internal::NewStage;

// Note [Suffixes without copies]
// A state keeps its best suffixes as Entries: plain values (the front stage's layers, its
// replica count and placement, its latency entry, the transfer behind it) over a Node, the
// suffix behind it. A suffix is expanded into a Node (its usage, device ids and latency
// list) only when the DP visits its state, so keeping or replacing a state's best suffix
// copies no vector: the transitions are many, the visited states few (the beam). The
// Node's devices and usage are recomputed from its parent with the same placement, so the
// DP decides exactly as when every Entry carried its own copies.
struct Node {
  int first = 0, last = 0;
  std::vector<int> devices;       // of the front stage (empty for the empty suffix)
  int next = -1;                  // the suffix behind the front stage; -1: none
  int depth = 0;                  // stages in the suffix
  int used = 0;                   // devices taken
  std::vector<int> usage;         // devices taken per server
  std::vector<LatencyStage> lat;  // the suffix's latency list, transfers included
  double peak_memory = 0;
  bool shard = false;  // the front stage shards its optimizer state (dp_costs.h)
};

// One kept suffix of a state: stage [first, last] on `replicas` devices placed by
// placement `placement` on the usage of node `parent`, in front of it (replicas = 0: the
// node itself).
struct Entry {
  double score = 0;
  int parent = 0;
  int first = 0, last = 0;
  int replicas = 0;
  size_t placement = 0;
  LatencyStage stage;
  double transfer_ms = 0;  // from the front stage to the parent's (when it has one)
  double peak_memory = 0;
  bool shard = false;
};

struct Complete {
  double latency = 0;
  long long order = 0;  // generation order: ties keep the first found
  int first = 0, last = 0;
  std::vector<int> devices;
  int next = 0;  // the node behind the front stage
  double peak_memory = 0;
  bool shard = false;
};

// A suffix being extended: its node and what every new stage in front of it shares.
struct Visit {
  int node = 0;
  int k = 0, k_deeper = 0;  // the new stage's warm-up depths
  LatencyTail tail;         // of the suffix's latency list (Note [Latency over a shared tail])
};

class DpSearch {
 public:
  DpSearch(const CostModel& cost, const Cluster& cluster, const DpOptions& o);
  std::vector<DpCandidate> Run(DpStats& stats);

 private:
  void KeepBestStates(int i);
  int Expand(const Entry& e);
  void VisitSuffix(int i, const Entry& entry);
  void PrependStage(int i, const Visit& v, const NewStage& s);
  void Keep(int ip, int state, const Entry& e);
  void Trim();
  std::vector<DpCandidate> Candidates() const;

  const CostModel& cost_;
  const DpOptions& o_;
  const int m_, M_, num_devices_;
  const std::vector<int> ends_;  // the last layer of each block
  const int per_state_, max_states_, server_size_;
  DpStagePlacer placer_;
  DpCosts costs_;
  std::vector<std::vector<int>> counts_;  // replica counts tried, by the most allowed (lazy)
  std::vector<Node> nodes_;               // [0]: the empty suffix
  // memo_[i][state]: the best suffixes of the state, by ascending score (ties: first found).
  std::vector<std::vector<std::vector<Entry>>> memo_;
  std::vector<Complete> complete_;
  long long order_ = 0;
  double threshold_ = 1e300;  // L of the k-th best complete plan once k are known
  DpStats stats_;
  NewStage stage_;
  // [head, head's transfer, new stage, its transfer]: the list of a score before the
  // suffix's latency list (Note [Latency over a shared tail]); from index 2 the list of
  // the new suffix before it.
  LatencyStage full_[4];
  std::vector<std::pair<double, size_t>> order_by_;  // the beam's (score, state) of a block
};

int ServerSize(const Cluster& cluster) {
  int size = 1;
  for (const ServerSpec& s : cluster.servers) size = std::max(size, s.devices);
  return size;
}

DpSearch::DpSearch(const CostModel& cost, const Cluster& cluster, const DpOptions& o)
    : cost_(cost),
      o_(o),
      m_(o.micro_batch_size),
      M_(o.num_micro_batches),
      num_devices_(cluster.num_devices()),
      ends_(BlockEnds(cost, o.max_blocks > 0 ? o.max_blocks : DefaultMaxBlocks(num_devices_))),
      per_state_(o.suffixes_per_state > 0                               ? o.suffixes_per_state
                 : static_cast<int>(ends_.size()) * num_devices_ <= 160 ? 4
                                                                        : 1),
      max_states_(o.max_states > 0     ? o.max_states
                  : num_devices_ <= 64 ? 2000
                                       : 48),
      server_size_(ServerSize(cluster)),
      placer_(cluster),
      costs_(cost, o, ends_, placer_),
      nodes_(1),
      memo_(ends_.size() + 1) {
  counts_.resize(std::min(num_devices_, m_) + 1);
  nodes_[0].usage.assign(cluster.num_servers(), 0);
  const int empty = placer_.EmptyState();
  memo_.back().resize(empty + 1);
  memo_.back()[empty].push_back(Entry{});
}

// The recurrence (docs/design.md section 6), backwards over the blocks: the kept suffixes
// of the layers from block i on (the best states, then each state's best suffixes) each get
// every new stage [ip, i) in front; the suffixes so made are kept at block ip, or complete
// a plan at ip = 0.
std::vector<DpCandidate> DpSearch::Run(DpStats& stats) {
  for (int i = static_cast<int>(ends_.size()); i >= 1; --i) {
    KeepBestStates(i);
    costs_.StartBlock(i);
    for (const std::vector<Entry>& entries : memo_[i])
      for (const Entry& e : entries) VisitSuffix(i, e);
    memo_[i].clear();
  }
  Trim();
  stats.states += stats_.states;
  stats.transitions += stats_.transitions;
  stats.deeper_misfits += stats_.deeper_misfits;
  return Candidates();
}

// Every new stage in front of the suffix of `entry`: each replica count n (at most m, at
// most the free devices) under each placement.
void DpSearch::VisitSuffix(int i, const Entry& entry) {
  ++stats_.states;
  Visit v;
  v.node = Expand(entry);
  const Node& suffix = nodes_[v.node];  // no node is added until the next entry
  const int max_n = std::min(num_devices_ - suffix.used, m_);
  if (max_n < 1) return;
  v.k = WarmupDepth(o_.memory_schedule, 0, suffix.depth + 1, M_);
  v.k_deeper = o_.deeper_schedule ? WarmupDepth(*o_.deeper_schedule, 0, suffix.depth + 1, M_) : v.k;
  v.tail = TailOf(suffix.lat, M_);
  placer_.Reset(suffix.usage);
  if (counts_[max_n].empty()) counts_[max_n] = ReplicaCounts(max_n, server_size_);
  for (int n : counts_[max_n])
    for (size_t pi = 0; pi < placer_.size(); ++pi)
      if (placer_.Place(n, pi, stage_)) PrependStage(i, v, stage_);
}

// The new stage s over blocks [ip, i) for every ip, in front of the suffix v: a complete
// plan when ip = 0, else a suffix at block ip, scored as the paper's T_PL with the layers
// before ip as one head stage on the devices left.
void DpSearch::PrependStage(int i, const Visit& v, const NewStage& s) {
  const Node& suffix = nodes_[v.node];
  const int last = ends_[i - 1];
  const bool behind = suffix.depth > 0;  // a stage behind the new one
  const std::span<const LatencyStage> score_list(full_, behind ? 4 : 3);
  const std::span<const LatencyStage> plan_list(full_ + 2, behind ? 2 : 1);
  costs_.StartStage(s);
  double transfer = behind ? -1.0 : 0.0;  // to the suffix, asked once a range fits
  for (int ip = i - 1; ip >= 0; --ip) {
    const std::optional<StageCost> c = costs_.Stage(ip, v.k, v.k_deeper, stats_);
    if (!c) continue;
    ++stats_.transitions;
    if (transfer < 0) {
      transfer = cost_.TransferMs(last, m_, s.devices, suffix.devices);
      full_[3] = {transfer, transfer, 0.0, 0.0};
    }
    const int first = ip == 0 ? 0 : ends_[ip - 1] + 1;
    full_[2] = {c->forward_ms, c->backward_ms, c->allreduce_ms, c->update_ms};
    const double peak = std::max(suffix.peak_memory, c->memory_bytes);
    if (ip == 0) {
      const double l = LatencyWithTail(plan_list, v.tail);
      if (l >= threshold_) continue;
      complete_.push_back({l, order_++, first, last, s.devices, v.node, peak, c->shard_optimizer});
      if (static_cast<int>(complete_.size()) >= 4 * o_.top_k + 16) Trim();
      continue;
    }
    if (s.free_after == 0) continue;  // no device left for the layers before
    const auto [head, head_transfer] = costs_.Head(ip);
    full_[0] = head;
    full_[1] = {head_transfer, head_transfer, 0.0, 0.0};
    Keep(ip, s.state,
         Entry{LatencyWithTail(score_list, v.tail), v.node, first, last, s.replicas, s.placement,
               full_[2], transfer, peak, c->shard_optimizer});
  }
}

// Keeps e among the per_state_ best suffixes of state `state` at block ip.
void DpSearch::Keep(int ip, int state, const Entry& e) {
  if (static_cast<int>(memo_[ip].size()) <= state) memo_[ip].resize(state + 1);
  std::vector<Entry>& kept = memo_[ip][state];
  if (static_cast<int>(kept.size()) >= per_state_ && e.score >= kept.back().score) return;
  auto pos = std::upper_bound(kept.begin(), kept.end(), e.score,
                              [](double v, const Entry& x) { return v < x.score; });
  kept.insert(pos, e);
  if (static_cast<int>(kept.size()) > per_state_) kept.pop_back();
}

// The beam: the states of block i with the best scores.
void DpSearch::KeepBestStates(int i) {
  auto& states = memo_[i];
  order_by_.clear();
  for (size_t id = 0; id < states.size(); ++id)
    if (!states[id].empty()) order_by_.emplace_back(states[id].front().score, id);
  if (static_cast<int>(order_by_.size()) <= max_states_) return;
  // The first max_states by (score, id), a total order: the same set as a full sort.
  std::nth_element(order_by_.begin(), order_by_.begin() + max_states_, order_by_.end());
  for (size_t r = max_states_; r < order_by_.size(); ++r) states[order_by_[r].second].clear();
}

// Expands a kept suffix into a node (Note [Suffixes without copies]).
int DpSearch::Expand(const Entry& e) {
  if (e.replicas == 0) return e.parent;
  Node nd;
  const Node& p = nodes_[e.parent];
  std::vector<int> counts;
  nd.devices = placer_.Replay(p.usage, e.replicas, e.placement, counts);
  nd.first = e.first;
  nd.last = e.last;
  nd.next = e.parent;
  nd.depth = p.depth + 1;
  nd.used = p.used + e.replicas;
  nd.usage = p.usage;
  for (size_t s = 0; s < nd.usage.size(); ++s) nd.usage[s] += counts[s];
  nd.lat.push_back(e.stage);
  if (p.depth > 0) {
    nd.lat.push_back({e.transfer_ms, e.transfer_ms, 0.0, 0.0});
    nd.lat.insert(nd.lat.end(), p.lat.begin(), p.lat.end());
  }
  nd.peak_memory = e.peak_memory;
  nd.shard = e.shard;
  nodes_.push_back(std::move(nd));
  return static_cast<int>(nodes_.size()) - 1;
}

// Keeps the top_k complete plans by (L, order); from then on only a faster one is kept.
void DpSearch::Trim() {
  std::sort(complete_.begin(), complete_.end(), [](const Complete& a, const Complete& b) {
    return a.latency != b.latency ? a.latency < b.latency : a.order < b.order;
  });
  if (static_cast<int>(complete_.size()) >= o_.top_k) {
    complete_.resize(o_.top_k);
    threshold_ = complete_.back().latency;
  }
}

std::vector<DpCandidate> DpSearch::Candidates() const {
  std::vector<DpCandidate> out;
  for (const Complete& c : complete_) {
    DpCandidate cand;
    cand.latency_ms = c.latency;
    cand.peak_memory_bytes = c.peak_memory;
    Plan& p = cand.plan;
    p.planner = "dapple";
    p.micro_batch_size = m_;
    p.num_micro_batches = M_;
    p.global_batch_size = m_ * M_;
    p.schedule = o_.memory_schedule;
    p.stages.push_back(StagePlan{c.first, c.last, "", "", c.devices});
    p.stages.back().shard_optimizer = c.shard;
    for (int at = c.next; at > 0; at = nodes_[at].next) {
      p.stages.push_back(StagePlan{nodes_[at].first, nodes_[at].last, "", "", nodes_[at].devices});
      p.stages.back().shard_optimizer = nodes_[at].shard;
    }
    out.push_back(std::move(cand));
  }
  return out;
}

}  // namespace

std::vector<DpCandidate> DappleDp(const CostModel& cost, const Cluster& cluster,
                                  const DpOptions& opt, DpStats* stats) {
  DAPPLE_CHECK(opt.micro_batch_size >= 1 && opt.num_micro_batches >= 1 && opt.top_k >= 1);
  DpStats local;
  return DpSearch(cost, cluster, opt).Run(stats ? *stats : local);
}

}  // namespace dapple
