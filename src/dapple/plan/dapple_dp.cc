// DAPPLE's DP over an explicit memo table: see dapple_dp.h for the state and transition.
#include "dapple/plan/dapple_dp.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "dapple/common/error.h"
#include "dapple/plan/layer_blocks.h"
#include "dapple/plan/pipeline_latency.h"
#include "dapple/plan/placement.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/schedule/schedule.h"

namespace dapple {
namespace {

struct SuffixStage {
  int first = 0, last = 0;
  std::vector<int> devices;
};

// The best suffix found for one state.
struct Entry {
  double score = 0;
  std::vector<int> usage;           // devices taken per server
  std::vector<SuffixStage> stages;  // front first
  std::vector<LatencyStage> lat;    // the suffix's latency list, transfers included
  double peak_memory = 0;
};

struct Complete {
  double latency = 0;
  long long order = 0;  // generation order: ties keep the first found
  std::vector<SuffixStage> stages;
  double peak_memory = 0;
};

// The head stage of a state's score: all layers before the suffix on the free devices.
struct Head {
  std::vector<int> devices;
  LatencyStage cost;
};

}  // namespace

std::vector<DpCandidate> DappleDp(const CostModel& cost, const Cluster& cluster,
                                  const DpOptions& opt, DpStats* stats) {
  const int m = opt.micro_batch_size, M = opt.num_micro_batches;
  DAPPLE_CHECK(m >= 1 && M >= 1 && opt.top_k >= 1);
  const std::vector<int> ends = BlockEnds(
      cost, opt.max_blocks > 0 ? opt.max_blocks : DefaultMaxBlocks(cluster.num_devices()));
  const int nb = static_cast<int>(ends.size());
  auto block_first = [&](int i) { return i == 0 ? 0 : ends[i - 1] + 1; };
  const int num_devices = cluster.num_devices();
  int server_size = 1;
  for (const ServerSpec& s : cluster.servers) server_size = std::max(server_size, s.devices);
  const bool identical = IdenticalServers(cluster);
  // Every policy under every server order (Note [Placement on mixed clusters]): one order,
  // the servers' own, unless the cluster is mixed. The head stage of a score goes
  // fresh-first on the fastest devices first.
  const std::vector<ServerOrder> orders = ServerOrders(cluster);
  const bool mixed = orders.size() > 1;
  auto place = [&](const std::vector<int>& usage, int n, PlacementPolicy policy, size_t o) {
    return mixed ? PlaceCountsInOrder(orders[o], usage, n, policy)
                 : PlaceCounts(cluster, usage, n, policy);
  };
  auto devices_of = [&](const std::vector<int>& usage, const std::vector<int>& take) {
    std::vector<int> devs = DevicesOf(cluster, usage, take);
    if (mixed) FastestFirst(cluster, devs);
    return devs;
  };
  std::vector<std::pair<PlacementPolicy, size_t>> placements;
  for (size_t o = 0; o < orders.size(); ++o)
    for (PlacementPolicy policy : AllPlacementPolicies()) placements.emplace_back(policy, o);
  const bool uniform = UniformDevices(cost);
  auto key_of = [&](std::vector<int> usage) {
    if (identical) std::sort(usage.begin(), usage.end());
    return usage;
  };
  std::vector<std::vector<int>> counts_for(std::min(num_devices, m) + 1);
  auto counts = [&](int max_n) -> const std::vector<int>& {
    if (counts_for[max_n].empty()) counts_for[max_n] = ReplicaCounts(max_n, server_size);
    return counts_for[max_n];
  };

  const int per_state = opt.suffixes_per_state > 0 ? opt.suffixes_per_state
                        : nb * num_devices <= 160  ? 4
                                                   : 1;
  const int max_states = opt.max_states > 0 ? opt.max_states : num_devices <= 64 ? 2000 : 48;
  // State keys (usage summaries) get small ids in the order they are first seen.
  std::map<std::vector<int>, int> key_ids;
  auto id_of = [&](const std::vector<int>& key) {
    return key_ids.try_emplace(key, static_cast<int>(key_ids.size())).first->second;
  };
  // memo[i][id]: the best suffixes of the state, by ascending score (ties: first found).
  std::vector<std::vector<std::vector<Entry>>> memo(nb + 1);
  {
    Entry start;
    start.usage.assign(cluster.num_servers(), 0);
    memo[nb].resize(id_of(key_of(start.usage)) + 1);
    memo[nb].back().push_back(std::move(start));
  }
  // heads[usage][ip]: the head stage of layers 0..block_first(ip)-1 on the free devices.
  std::map<std::vector<int>, std::vector<Head>> heads;
  // head_ms[usage] per devices of the new stage: the head's transfer time to it by ip (< 0:
  // not computed yet); the same usage and devices recur at many blocks.
  std::map<std::vector<int>, std::vector<std::pair<std::vector<int>, std::vector<double>>>> head_ms;
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
  std::vector<LatencyStage> lat, full;
  std::vector<int> usage;
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
      std::vector<std::pair<double, int>> order_by;
      for (size_t id = 0; id < states.size(); ++id)
        if (!states[id].empty()) order_by.emplace_back(states[id].front().score, id);
      if (static_cast<int>(order_by.size()) > max_states) {
        std::sort(order_by.begin(), order_by.end());
        for (size_t r = max_states; r < order_by.size(); ++r) states[order_by[r].second].clear();
      }
    }
    const int last = ends[i - 1];
    for (auto& row : table) std::fill(row.begin(), row.end(), RangeCost{});
    // Per new stage's devices, its allreduce time by ip (< 0: not computed yet), for `last`.
    std::map<std::vector<int>, std::vector<double>> allreduce_ms;
    for (const std::vector<Entry>& entries : states)
      for (const Entry& e : entries) {
        ++local.states;
        const int used = std::accumulate(e.usage.begin(), e.usage.end(), 0);
        const int free = num_devices - used;
        const int max_n = std::min(free, m);
        if (max_n < 1) continue;
        const int after = static_cast<int>(e.stages.size());
        const int k = WarmupDepth(opt.memory_schedule, 0, after + 1, M);
        const int k_deeper =
            opt.deeper_schedule ? WarmupDepth(*opt.deeper_schedule, 0, after + 1, M) : k;
        for (int n : counts(max_n)) {
          std::vector<std::vector<int>> seen;
          const int samples = SamplesPerReplica(m, n);
          for (const auto& [policy, server_order] : placements) {
            auto take = place(e.usage, n, policy, server_order);
            if (!take || std::find(seen.begin(), seen.end(), *take) != seen.end()) continue;
            seen.push_back(*take);
            std::vector<int> devs = devices_of(e.usage, *take);
            const double t_after =
                after > 0 ? cost.TransferMs(last, m, devs, e.stages[0].devices) : 0;
            usage = e.usage;
            for (size_t s = 0; s < usage.size(); ++s) usage[s] += (*take)[s];
            const int free_after = free - n;
            const int id = id_of(key_of(usage));
            std::vector<Head>& head_of = heads[usage];
            if (head_of.empty()) head_of.resize(nb);
            auto& ms_of = head_ms[usage];
            auto known = std::find_if(ms_of.begin(), ms_of.end(),
                                      [&](const auto& x) { return x.first == devs; });
            if (known == ms_of.end())
              known = ms_of.insert(ms_of.end(), {devs, std::vector(nb, -1.0)});
            std::vector<double>& head_to_devs = known->second;
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
                  std::vector<double>& ar = allreduce_ms[devs];
                  if (ar.empty()) ar.assign(nb, -1.0);
                  if (ar[ip] < 0) ar[ip] = cost.AllReduceMs(first, last, devs);
                  c.allreduce_ms = ar[ip];
                }
              } else {
                c = EvaluateStage(cost, first, last, devs, m, k);
                if (opt.enforce_memory && !c.fits()) continue;
                if (opt.enforce_memory && opt.deeper_schedule) ++local.deeper_misfits;
              }
              ++local.transitions;
              lat.clear();
              lat.push_back({c.forward_ms, c.backward_ms, c.allreduce_ms, c.update_ms});
              if (after > 0) {
                lat.push_back({t_after, t_after, 0.0, 0.0});
                lat.insert(lat.end(), e.lat.begin(), e.lat.end());
              }
              const double peak = std::max(e.peak_memory, c.memory_bytes);
              if (ip == 0) {  // a complete plan
                double l = ComputeLatency(lat, M).latency_ms;
                if (l >= threshold) continue;
                Complete done{l, order++, {}, peak};
                done.stages.reserve(after + 1);
                done.stages.push_back({first, last, devs});
                done.stages.insert(done.stages.end(), e.stages.begin(), e.stages.end());
                complete.push_back(std::move(done));
                if (static_cast<int>(complete.size()) >= 4 * opt.top_k + 16) trim();
                continue;
              }
              if (free_after == 0) continue;  // no device left for the layers before
              // The paper's T_PL: the layers before form one stage on the free devices.
              Head& head = head_of[ip];
              if (head.devices.empty()) {
                auto head_take =
                    place(usage, std::min(free_after, m), PlacementPolicy::kFreshFirst, 0);
                if (head_take) head.devices = devices_of(usage, *head_take);
                StageCost hc =
                    EvaluateStage(cost, 0, first - 1, head.devices, m, 0, false, false, uniform);
                head.cost = {hc.forward_ms, hc.backward_ms, hc.allreduce_ms, hc.update_ms};
              }
              if (head_to_devs[ip] < 0)
                head_to_devs[ip] = cost.TransferMs(first - 1, m, head.devices, devs);
              const double ht = head_to_devs[ip];
              full.clear();
              full.push_back(head.cost);
              full.push_back({ht, ht, 0.0, 0.0});
              full.insert(full.end(), lat.begin(), lat.end());
              const double score = ComputeLatency(full, M).latency_ms;
              if (static_cast<int>(memo[ip].size()) <= id) memo[ip].resize(id + 1);
              std::vector<Entry>& kept = memo[ip][id];
              if (static_cast<int>(kept.size()) >= per_state && score >= kept.back().score)
                continue;
              auto pos = std::upper_bound(kept.begin(), kept.end(), score,
                                          [](double v, const Entry& x) { return v < x.score; });
              pos = kept.insert(pos, Entry{});
              if (static_cast<int>(kept.size()) > per_state) kept.pop_back();
              Entry& ne = *pos;
              ne.score = score;
              ne.usage = usage;
              ne.stages.clear();
              ne.stages.push_back({first, last, devs});
              ne.stages.insert(ne.stages.end(), e.stages.begin(), e.stages.end());
              ne.lat = lat;
              ne.peak_memory = peak;
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
    for (SuffixStage& s : c.stages) {
      StagePlan sp;
      sp.first_layer = s.first;
      sp.last_layer = s.last;
      sp.devices = std::move(s.devices);
      p.stages.push_back(std::move(sp));
    }
    out.push_back(std::move(cand));
  }
  return out;
}

}  // namespace dapple
