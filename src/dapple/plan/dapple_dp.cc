// DAPPLE's DP over an explicit memo table: see dapple_dp.h for the state and transition.
#include "dapple/plan/dapple_dp.h"

#include <algorithm>
#include <span>
#include <unordered_map>

#include "dapple/common/error.h"
#include "dapple/plan/dp_state.h"
#include "dapple/plan/layer_blocks.h"
#include "dapple/plan/pipeline_latency.h"
#include "dapple/plan/placement.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/usage_placer.h"
#include "dapple/schedule/schedule.h"

namespace dapple {
namespace {

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
};

// One kept suffix of a state: stage [first, last] on `replicas` devices placed by
// placements[placement] on the usage of node `parent`, in front of it (replicas = 0: the
// node itself).
struct Entry {
  double score = 0;
  int parent = 0;
  int first = 0, last = 0;
  int replicas = 0;
  int placement = 0;
  LatencyStage stage;
  double transfer_ms = 0;  // from the front stage to the parent's (when it has one)
  double peak_memory = 0;
};

struct Complete {
  double latency = 0;
  long long order = 0;  // generation order: ties keep the first found
  int first = 0, last = 0;
  std::vector<int> devices;
  int next = 0;  // the node behind the front stage
  double peak_memory = 0;
};

// Per usage (devices taken per server, not the canonical key: the head's placement
// depends on which servers): the head stage of a state's score (all layers before the
// suffix on the free devices: the same devices whatever ip) and its costs by ip (forward
// < 0: not computed yet); both recur at many blocks. The head's transfer to a new stage
// and the new stage's allreduce are asked of the cost model, which answers the same
// devices asked again at other layers in O(1) (Note [Split-concat by server runs],
// Note [Rings asked again]): tables of them by device list cost more in allocations.
struct UsageMemo {
  std::vector<int> head_devices;
  std::vector<LatencyStage> head_cost;
  // The head's transfer to a new stage by ip (< 0: not asked yet), per take that led to
  // this usage: with the usage, the take fixes the new stage's devices. A usage is reached
  // by several takes (more than 8 on 2 servers of 8: with 8 kept, 700 K of GNMT-16's
  // asks missed); past kTakesKept the cost model is asked each time. Filled for every
  // ip before the block at once (CostModel::TransferMsAt). Where layers' bytes per sample
  // are fractional the cost model walks the slices at each call (Note [Split-concat by
  // server runs]): GNMT-16 asked it 2 million times without these.
  std::vector<std::pair<UsagePlacer::Take, std::vector<double>>> head_to;
};
constexpr size_t kTakesKept = 64;

}  // namespace

std::vector<DpCandidate> DappleDp(const CostModel& cost, const Cluster& cluster,
                                  const DpOptions& opt, DpStats* stats) {
  const int m = opt.micro_batch_size, M = opt.num_micro_batches;
  DAPPLE_CHECK(m >= 1 && M >= 1 && opt.top_k >= 1);
  const std::vector<int> ends = BlockEnds(
      cost, opt.max_blocks > 0 ? opt.max_blocks : DefaultMaxBlocks(cluster.num_devices()));
  const int nb = static_cast<int>(ends.size());
  auto block_first = [&](int i) { return i == 0 ? 0 : ends[i - 1] + 1; };
  std::vector<int> block_firsts(nb);
  for (int b = 0; b < nb; ++b) block_firsts[b] = block_first(b);
  const int num_devices = cluster.num_devices();
  int server_size = 1;
  for (const ServerSpec& s : cluster.servers) server_size = std::max(server_size, s.devices);
  // Every policy under every server order (Note [Placement on mixed clusters]): one order,
  // the servers' own, unless the cluster is mixed. The head stage of a score goes
  // fresh-first on the fastest devices first.
  const std::vector<ServerOrder> orders = ServerOrders(cluster);
  const bool mixed = orders.size() > 1;
  auto place = [&](const std::vector<int>& usage, int n, PlacementPolicy policy, size_t o) {
    return mixed ? PlaceCountsInOrder(orders[o], usage, n, policy)
                 : PlaceCounts(cluster, usage, n, policy);
  };
  // A new stage's placement on the usage `placer` was reset to, as its non-zero counts
  // (Note [Placement from one usage]); mixed clusters place under each server order.
  UsagePlacer placer(cluster);
  std::vector<int> dense;
  auto place_into = [&](const std::vector<int>& usage, int n, PlacementPolicy policy, size_t o,
                        UsagePlacer::Take& take) {
    if (!mixed) return placer.Place(n, policy, take);
    auto t = PlaceCountsInOrder(orders[o], usage, n, policy);
    take.clear();
    if (!t) return false;
    for (size_t s = 0; s < t->size(); ++s)
      if ((*t)[s] > 0) take.emplace_back(static_cast<int>(s), (*t)[s]);
    return true;
  };
  auto devices_into = [&](const std::vector<int>& usage, const std::vector<int>& take,
                          std::vector<int>& devs) {
    DevicesOf(cluster, usage, take, devs);
    if (mixed) FastestFirst(cluster, devs);
  };
  auto new_devices_into = [&](const std::vector<int>& usage, const UsagePlacer::Take& take,
                              std::vector<int>& devs) {
    if (!mixed) return placer.DevicesOf(take, devs);
    dense.assign(usage.size(), 0);
    for (const auto& [s, t] : take) dense[s] = t;
    devices_into(usage, dense, devs);
  };
  auto devices_of = [&](const std::vector<int>& usage, const std::vector<int>& take) {
    std::vector<int> devs;
    devices_into(usage, take, devs);
    return devs;
  };
  std::vector<std::pair<PlacementPolicy, size_t>> placements;
  for (size_t o = 0; o < orders.size(); ++o)
    for (PlacementPolicy policy : AllPlacementPolicies()) placements.emplace_back(policy, o);
  const bool uniform = UniformDevices(cost);
  std::vector<std::vector<int>> counts_for(std::min(num_devices, m) + 1);
  auto counts = [&](int max_n) -> const std::vector<int>& {
    if (counts_for[max_n].empty()) counts_for[max_n] = ReplicaCounts(max_n, server_size);
    return counts_for[max_n];
  };

  const int per_state = opt.suffixes_per_state > 0 ? opt.suffixes_per_state
                        : nb * num_devices <= 160  ? 4
                                                   : 1;
  const int max_states = opt.max_states > 0 ? opt.max_states : num_devices <= 64 ? 2000 : 48;
  UsageKeys keys(cluster);     // Note [Canonical usage states]
  std::vector<Node> nodes(1);  // nodes[0]: the empty suffix
  nodes[0].usage.assign(cluster.num_servers(), 0);
  // Expands a kept suffix into a node (Note [Suffixes without copies]).
  auto expand = [&](const Entry& e) {
    if (e.replicas == 0) return e.parent;
    Node nd;
    {
      const Node& p = nodes[e.parent];
      const auto& [policy, o] = placements[e.placement];
      auto take = place(p.usage, e.replicas, policy, o);
      DAPPLE_CHECK(take.has_value());
      nd.first = e.first;
      nd.last = e.last;
      nd.devices = devices_of(p.usage, *take);
      nd.next = e.parent;
      nd.depth = p.depth + 1;
      nd.used = p.used + e.replicas;
      nd.usage = p.usage;
      for (size_t s = 0; s < nd.usage.size(); ++s) nd.usage[s] += (*take)[s];
      nd.lat.push_back(e.stage);
      if (p.depth > 0) {
        nd.lat.push_back({e.transfer_ms, e.transfer_ms, 0.0, 0.0});
        nd.lat.insert(nd.lat.end(), p.lat.begin(), p.lat.end());
      }
      nd.peak_memory = e.peak_memory;
    }
    nodes.push_back(std::move(nd));
    return static_cast<int>(nodes.size()) - 1;
  };
  // memo[i][id]: the best suffixes of the state, by ascending score (ties: first found).
  std::vector<std::vector<std::vector<Entry>>> memo(nb + 1);
  memo[nb].resize(keys.IdOf(nodes[0].usage) + 1);
  memo[nb].back().push_back(Entry{});
  UsageHasher hasher(cluster);  // Note [Usages by incremental hash]
  UsageTable<UsageMemo> by_usage;
  std::vector<Complete> complete;
  long long order = 0;
  double threshold = 1e300;  // L of the k-th best complete plan once k are known
  auto trim = [&] {
    std::sort(complete.begin(), complete.end(), [](const Complete& a, const Complete& b) {
      return a.latency != b.latency ? a.latency < b.latency : a.order < b.order;
    });
    if (static_cast<int>(complete.size()) >= opt.top_k) {
      complete.resize(opt.top_k);
      threshold = complete.back().latency;
    }
  };
  DpStats local;
  // full = [head, head's transfer, new stage, its transfer]: the list of a score before the
  // suffix's latency list, its tail (Note [Latency over a shared tail]); from index 2 the
  // list of the new suffix before that tail.
  LatencyStage full[4];
  std::vector<int> usage, devs;
  // The new stage's per-server counts under each placement (a placement that repeats an
  // earlier one's is tried once), and which of them are valid.
  std::vector<UsagePlacer::Take> takes(placements.size());
  std::vector<int> key;                          // the new usage's UsageKeys key, when symmetric
  std::vector<int> head_take;                    // a head stage's counts per server
  std::vector<std::pair<double, int>> order_by;  // the beam's (score, id) of a block
  std::vector<char> valid(placements.size());
  // The new stage's allreduce by ip, asked of the model for every ip at once (uniform
  // devices): its devices are the same at every ip.
  std::vector<double> allreduce_by_ip(nb);
  // Per block range ending at the current `last`, for uniform devices: F and B of the
  // largest slice with n replicas, static and activation bytes (index [ip][n]).
  struct RangeCost {
    double f = -1, b = 0, act = 0, stat = 0, update = 0;
  };
  std::vector<std::vector<RangeCost>> table(nb, std::vector<RangeCost>(counts_for.size()));
  const double device_memory = cost.DeviceMemoryBytes(0);

  for (int i = nb; i >= 1; --i) {
    auto& states = memo[i];
    {  // beam: keep the states with the best scores
      order_by.clear();
      for (size_t id = 0; id < states.size(); ++id)
        if (!states[id].empty()) order_by.emplace_back(states[id].front().score, id);
      if (static_cast<int>(order_by.size()) > max_states) {
        // The first max_states by (score, id), a total order: the same set as a full sort.
        std::nth_element(order_by.begin(), order_by.begin() + max_states, order_by.end());
        for (size_t r = max_states; r < order_by.size(); ++r) states[order_by[r].second].clear();
      }
    }
    const int last = ends[i - 1];
    for (auto& row : table) std::fill(row.begin(), row.end(), RangeCost{});
    for (const std::vector<Entry>& entries : states)
      for (const Entry& entry : entries) {
        ++local.states;
        const int node = expand(entry);
        const Node& e = nodes[node];  // no node is added until the next entry
        const int free = num_devices - e.used;
        const int max_n = std::min(free, m);
        if (max_n < 1) continue;
        const int after = e.depth;
        const int k = WarmupDepth(opt.memory_schedule, 0, after + 1, M);
        const int k_deeper =
            opt.deeper_schedule ? WarmupDepth(*opt.deeper_schedule, 0, after + 1, M) : k;
        const LatencyTail tail = TailOf(e.lat, M);
        // The lists before the tail: of a score (`head` first) and of a complete plan.
        const std::span<const LatencyStage> head_list(full, after > 0 ? 4 : 3);
        const std::span<const LatencyStage> lat(full + 2, after > 0 ? 2 : 1);
        if (!mixed) placer.Reset(e.usage);
        const uint64_t base_hash = hasher.Of(e.usage);
        const std::vector<int> base_key =
            keys.symmetric() ? keys.KeyOf(e.usage) : std::vector<int>{};
        for (int n : counts(max_n)) {
          const int samples = SamplesPerReplica(m, n);
          for (size_t pi = 0; pi < placements.size(); ++pi) {
            const auto& [policy, server_order] = placements[pi];
            UsagePlacer::Take& take = takes[pi];
            valid[pi] = place_into(e.usage, n, policy, server_order, take);
            if (!valid[pi]) continue;
            bool again = false;
            for (size_t q = 0; q < pi && !again; ++q) again = valid[q] && takes[q] == take;
            if (again) continue;
            new_devices_into(e.usage, take, devs);
            // The transfer to the suffix, asked once a range of blocks fits (none may).
            double t_after = after > 0 ? -1.0 : 0.0;
            usage = e.usage;
            for (const auto& [s, t] : take) usage[s] += t;
            const int free_after = free - n;
            uint64_t usage_hash = base_hash;
            for (const auto& [s, t] : take)
              usage_hash = hasher.Moved(usage_hash, s, e.usage[s], e.usage[s] + t);
            int id;
            if (keys.symmetric()) {  // the key of e's usage with the servers taken from moved
              key = base_key;
              for (const auto& [s, t] : take) {
                --key[e.usage[s]];
                ++key[e.usage[s] + t];
              }
              id = keys.IdOfKey(key);
            } else {
              id = keys.IdOf(usage);
            }
            UsageMemo* um = nullptr;                 // looked up when first needed
            std::vector<double>* head_to = nullptr;  // its transfers for this take, if kept
            bool allreduce_asked = false;
            for (int ip = i - 1; ip >= 0; --ip) {
              const int first = block_first(ip);
              StageCost c;
              if (uniform) {
                RangeCost& rc = table[ip][n];
                if (rc.f < 0) {
                  rc.f = cost.ForwardMs(first, last, samples, 0);
                  rc.b = cost.BackwardMs(first, last, samples, 0);
                  rc.act = cost.ActivationBytes(first, last, samples);
                  rc.stat = cost.StaticMemoryBytes(first, last);
                  rc.update = cost.UpdateMs(first, last, 0);
                }
                c.forward_ms = rc.f;
                c.backward_ms = rc.b;
                c.update_ms = rc.update;
                c.memory_bytes = rc.stat + k * rc.act;
                c.device_memory_bytes = device_memory;
                if (opt.enforce_memory && !c.fits()) continue;
                if (opt.enforce_memory && rc.stat + k_deeper * rc.act > device_memory)
                  ++local.deeper_misfits;
                if (n > 1) {
                  if (!allreduce_asked) {
                    cost.AllReduceMsFrom(std::span<const int>(block_firsts.data(), i), last, devs,
                                         allreduce_by_ip.data());
                    allreduce_asked = true;
                  }
                  c.allreduce_ms = allreduce_by_ip[ip];
                }
              } else {
                c = EvaluateStage(cost, first, last, devs, m, k);
                if (opt.enforce_memory && !c.fits()) continue;
                if (opt.enforce_memory && opt.deeper_schedule) ++local.deeper_misfits;
              }
              ++local.transitions;
              if (t_after < 0) {
                t_after = cost.TransferMs(last, m, devs, e.devices);
                full[3] = {t_after, t_after, 0.0, 0.0};
              }
              const LatencyStage stage{c.forward_ms, c.backward_ms, c.allreduce_ms, c.update_ms};
              full[2] = stage;
              const double peak = std::max(e.peak_memory, c.memory_bytes);
              if (ip == 0) {  // a complete plan
                double l = LatencyWithTail(lat, tail);
                if (l >= threshold) continue;
                complete.push_back({l, order++, first, last, devs, node, peak});
                if (static_cast<int>(complete.size()) >= 4 * opt.top_k + 16) trim();
                continue;
              }
              if (free_after == 0) continue;  // no device left for the layers before
              // The paper's T_PL: the layers before form one stage on the free devices.
              if (!um) {
                um = &by_usage.At(usage_hash, usage);
                if (um->head_devices.empty()) {
                  const int head_n = std::min(free_after, m);
                  if (mixed) {
                    auto in_order = place(usage, head_n, PlacementPolicy::kFreshFirst, 0);
                    DAPPLE_CHECK(in_order.has_value());
                    um->head_devices = devices_of(usage, *in_order);
                  } else {
                    DAPPLE_CHECK(PlaceCountsInto(cluster, usage, head_n,
                                                 PlacementPolicy::kFreshFirst, head_take));
                    DevicesOf(cluster, usage, head_take, um->head_devices);
                  }
                  um->head_cost.assign(nb, {-1.0, 0.0, 0.0, 0.0});
                }
                for (auto& [kept_take, ms] : um->head_to)
                  if (kept_take == take) head_to = &ms;
                if (!head_to && um->head_to.size() < kTakesKept) {
                  // Every boundary before this block at once: the transfer after layer
                  // ends[ip - 1] = first - 1 for ip = 1..i-1 (CostModel::TransferMsAt).
                  head_to = &um->head_to.emplace_back(take, std::vector<double>(nb, -1.0)).second;
                  cost.TransferMsAt(std::span<const int>(ends.data(), i - 1), m, um->head_devices,
                                    devs, head_to->data() + 1);
                }
              }
              if (um->head_cost[ip].forward_ms < 0) {
                StageCost hc = EvaluateStage(cost, 0, first - 1, um->head_devices, m, 0, false,
                                             false, uniform);
                um->head_cost[ip] = {hc.forward_ms, hc.backward_ms, hc.allreduce_ms, hc.update_ms};
              }
              double ht = head_to ? (*head_to)[ip] : -1.0;
              if (ht < 0) {
                ht = cost.TransferMs(first - 1, m, um->head_devices, devs);
                if (head_to) (*head_to)[ip] = ht;
              }
              full[0] = um->head_cost[ip];
              full[1] = {ht, ht, 0.0, 0.0};
              const double score = LatencyWithTail(head_list, tail);
              if (static_cast<int>(memo[ip].size()) <= id) memo[ip].resize(id + 1);
              std::vector<Entry>& kept = memo[ip][id];
              if (static_cast<int>(kept.size()) >= per_state && score >= kept.back().score)
                continue;
              auto pos = std::upper_bound(kept.begin(), kept.end(), score,
                                          [](double v, const Entry& x) { return v < x.score; });
              kept.insert(pos, Entry{score, node, first, last, n, static_cast<int>(pi), stage,
                                     t_after, peak});
              if (static_cast<int>(kept.size()) > per_state) kept.pop_back();
            }
          }
        }
      }
    states.clear();
  }
  trim();
  if (stats) {
    stats->states += local.states;
    stats->transitions += local.transitions;
    stats->deeper_misfits += local.deeper_misfits;
  }
  std::vector<DpCandidate> out;
  for (Complete& c : complete) {
    DpCandidate cand;
    cand.latency_ms = c.latency;
    cand.peak_memory_bytes = c.peak_memory;
    Plan& p = cand.plan;
    p.planner = "dapple";
    p.micro_batch_size = m;
    p.num_micro_batches = M;
    p.global_batch_size = m * M;
    p.schedule = opt.memory_schedule;
    StagePlan front;
    front.first_layer = c.first;
    front.last_layer = c.last;
    front.devices = std::move(c.devices);
    p.stages.push_back(std::move(front));
    for (int at = c.next; at > 0; at = nodes[at].next) {
      StagePlan sp;
      sp.first_layer = nodes[at].first;
      sp.last_layer = nodes[at].last;
      sp.devices = nodes[at].devices;
      p.stages.push_back(std::move(sp));
    }
    out.push_back(std::move(cand));
  }
  return out;
}

}  // namespace dapple
