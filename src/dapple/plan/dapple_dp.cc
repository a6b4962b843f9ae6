// DAPPLE's DP over an explicit memo table: see dapple_dp.h for the state and transition.
#include "dapple/plan/dapple_dp.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "dapple/common/error.h"
#include "dapple/plan/layer_blocks.h"
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

}  // namespace

std::vector<DpCandidate> DappleDp(const CostModel& cost, const Cluster& cluster,
                                  const DpOptions& opt, DpStats* stats) {
  const int m = opt.micro_batch_size, M = opt.num_micro_batches;
  DAPPLE_CHECK(m >= 1 && M >= 1 && opt.top_k >= 1);
  const std::vector<int> ends = BlockEnds(cost, opt.max_blocks);
  const int nb = static_cast<int>(ends.size());
  auto block_first = [&](int i) { return i == 0 ? 0 : ends[i - 1] + 1; };
  const int num_devices = cluster.num_devices();
  int server_size = 1;
  for (const ServerSpec& s : cluster.servers) server_size = std::max(server_size, s.devices);
  const bool identical = IdenticalServers(cluster);
  auto key_of = [&](std::vector<int> usage) {
    if (identical) std::sort(usage.begin(), usage.end());
    return usage;
  };

  std::vector<std::map<std::vector<int>, Entry>> memo(nb + 1);
  {
    Entry start;
    start.usage.assign(cluster.num_servers(), 0);
    memo[nb].emplace(start.usage, std::move(start));
  }
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

  for (int i = nb; i >= 1; --i) {
    auto& states = memo[i];
    if (static_cast<int>(states.size()) > opt.max_states) {  // beam: keep the best scores
      std::vector<std::pair<double, std::vector<int>>> order_by;
      for (auto& [k, e] : states) order_by.emplace_back(e.score, k);
      std::sort(order_by.begin(), order_by.end());
      for (size_t r = opt.max_states; r < order_by.size(); ++r) states.erase(order_by[r].second);
    }
    const int last = ends[i - 1];
    for (auto& [key, e] : states) {
      ++local.states;
      const int used = std::accumulate(e.usage.begin(), e.usage.end(), 0);
      const int free = num_devices - used;
      const int max_n = std::min(free, m);
      if (max_n < 1) continue;
      const int after = static_cast<int>(e.stages.size());
      const int k = WarmupDepth(opt.memory_schedule, 0, after + 1, M);
      const std::vector<int> counts = ReplicaCounts(max_n, server_size);
      for (int ip = i - 1; ip >= 0; --ip) {
        const int first = block_first(ip);
        for (int n : counts) {
          std::vector<std::vector<int>> seen;
          for (PlacementPolicy policy : AllPlacementPolicies()) {
            auto take = PlaceCounts(cluster, e.usage, n, policy);
            if (!take || std::find(seen.begin(), seen.end(), *take) != seen.end()) continue;
            seen.push_back(*take);
            std::vector<int> devs = DevicesOf(cluster, e.usage, *take);
            StageCost c = EvaluateStage(cost, first, last, devs, m, k);
            if (opt.enforce_memory && !c.fits()) continue;
            ++local.transitions;
            std::vector<LatencyStage> lat;
            lat.reserve(e.lat.size() + 4);
            lat.push_back({c.forward_ms, c.backward_ms, c.allreduce_ms});
            if (after > 0) {
              double t = cost.Transfer(last, m, devs, e.stages[0].devices).ms;
              lat.push_back({t, t, 0.0});
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
            const int free_after = free - n;
            if (free_after == 0) continue;  // no device left for the layers before
            std::vector<int> usage = e.usage;
            for (size_t s = 0; s < usage.size(); ++s) usage[s] += (*take)[s];
            // The paper's T_PL: the layers before form one stage on the free devices.
            std::vector<int> head =
                PlaceDevices(cluster, usage, std::min(free_after, m), PlacementPolicy::kFreshFirst);
            StageCost hc = EvaluateStage(cost, 0, first - 1, head, m, 0);
            double ht = cost.Transfer(first - 1, m, head, devs).ms;
            std::vector<LatencyStage> full;
            full.reserve(lat.size() + 2);
            full.push_back({hc.forward_ms, hc.backward_ms, hc.allreduce_ms});
            full.push_back({ht, ht, 0.0});
            full.insert(full.end(), lat.begin(), lat.end());
            const double score = ComputeLatency(full, M).latency_ms;
            auto [it, inserted] = memo[ip].try_emplace(key_of(usage));
            if (!inserted && score >= it->second.score) continue;
            Entry& ne = it->second;
            ne.score = score;
            ne.usage = std::move(usage);
            ne.stages.clear();
            ne.stages.push_back({first, last, std::move(devs)});
            ne.stages.insert(ne.stages.end(), e.stages.begin(), e.stages.end());
            ne.lat = std::move(lat);
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
