// PipeDream's planner objective as a baseline: see baselines.h.
#include <algorithm>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "dapple/common/error.h"
#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/dp/layer_blocks.h"
#include "dapple/plan/dp/placement.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/schedule/schedule.h"

namespace dapple {

std::optional<Plan> PipeDreamPlan(const CostModel& cost, const Cluster& cluster, MicroBatching mb,
                                  bool enforce_memory, int max_blocks) {
  const int m = mb.micro_batch_size, M = mb.num_micro_batches;
  const std::vector<int> ends =
      BlockEnds(cost, max_blocks > 0 ? max_blocks : DefaultMaxBlocks(cluster.num_devices()));
  const int nb = static_cast<int>(ends.size());
  const int D = cluster.num_devices();
  int server_size = 1;
  for (const ServerSpec& s : cluster.servers) server_size = std::max(server_size, s.devices);
  auto block_first = [&](int i) { return i == 0 ? 0 : ends[i - 1] + 1; };
  const double inf = 1e300;
  // Backwards: best[i][d] = slowest stage or transfer when the blocks i..nb-1 run on the
  // last d devices (ids D-d..D-1). from[i][d] = (next block, devices of this stage).
  std::vector<std::vector<double>> best(nb + 1, std::vector<double>(D + 1, inf));
  std::vector<std::vector<std::pair<int, int>>> from(nb + 1,
                                                     std::vector<std::pair<int, int>>(D + 1));
  best[nb][0] = 0;
  std::vector<int> devs, to;
  // With identical servers a stage's costs depend on its layers, its replica count and
  // where its device range starts inside a server, not on which server: cache them.
  const bool symmetric = IdenticalServers(cluster);
  const bool uniform = UniformDevices(cost);
  // stage_cache by (n, offset), K = 0, per block i (a hash table: the replica counts are
  // few, a dense table on 8192 devices was 80 MB to clear per m). On uniform devices only
  // the allreduce depends on the devices beyond the first one's kind (EvaluateStage costs
  // one replica, and devices of one kind cost the same: CostModel::DeviceKind), so the
  // rest is cached by (n, kind of the first device) and the allreduce by (n, offset),
  // asked for every ip at once (CostModel::AllReduceMsFrom): the figures are the same;
  // transfer_cache by (n, next stage's n, offset), for every block end at once: asked in
  // a row with the same devices, the cost model sums them from one walk over the slices
  // (Note [Split-concat by link] in the analytic model), where one walk per block was most
  // of PipeDream's time on 8192 devices.
  // Keyed n << 20 | offset: the stage's costs by ip (forward < 0: not computed yet), one
  // lookup per (d, n) rather than per (d, n, ip).
  std::unordered_map<uint64_t, std::vector<StageCost>> stage_cache;
  std::unordered_map<uint64_t, std::vector<double>> allreduce_cache;  // uniform: by (n, offset)
  std::vector<int> block_firsts(nb);
  for (int b = 0; b < nb; ++b) block_firsts[b] = block_first(b);
  // By n << 40 | next stage's n << 20 | offset (replica counts and offsets are below
  // 2^20: at most m and the server size).
  std::unordered_map<uint64_t, std::vector<double>> transfer_cache;
  DAPPLE_CHECK(D < (1 << 20), "PipeDream's planner: more than 2^20 devices");
  // The replica counts by their bound, and per block i a replica count's activation
  // bytes by ip (both were asked again for every d: 8192 times per block on 8192 devices).
  std::vector<std::vector<int>> counts_by_max(std::min(D, m) + 1);
  std::vector<std::vector<double>> act_by_n(std::min(D, m) + 1);
  std::vector<int> act_done;  // the n whose act_by_n holds block i's
  for (int i = nb; i >= 1; --i) {
    const int last = ends[i - 1];
    stage_cache.clear();
    allreduce_cache.clear();
    for (int n : act_done) act_by_n[n].clear();
    act_done.clear();
    for (int d = 0; d < D; ++d) {
      if (best[i][d] >= inf) continue;
      // At most this many stages can follow, each on a block and a device of its own.
      const int after = std::min(nb - i, d);
      const int k = WarmupDepth(ScheduleKind::kDappleA, 0, after + 1, M);
      const int max_n = std::min(D - d, m);
      if (counts_by_max[max_n].empty()) counts_by_max[max_n] = ReplicaCounts(max_n, server_size);
      for (int n : counts_by_max[max_n]) {
        // The stage's devices and those of the stage after, listed only when a cost is not
        // cached (on 8192 devices listing them for every (d, n) was most of the time).
        bool listed = false;
        auto list = [&] {
          if (listed) return;
          listed = true;
          devs.clear();
          for (int x = D - d - n; x < D - d; ++x) devs.push_back(x);
          to.clear();
          if (d > 0)
            for (int x = D - d; x < D - d + from[i][d].second; ++x) to.push_back(x);
        };
        double transfer = 0;
        const int offset = (D - d - n) % server_size;
        if (d > 0 && symmetric) {
          const uint64_t key = static_cast<uint64_t>(n) << 40 |
                               static_cast<uint64_t>(from[i][d].second) << 20 |
                               static_cast<uint64_t>(offset);
          auto it = transfer_cache.find(key);
          if (it == transfer_cache.end()) {
            list();
            std::vector<double> by_block(nb + 1);
            for (int b = 1; b <= nb; ++b)
              by_block[b] = 2 * cost.TransferMs(ends[b - 1], m, devs, to);
            it = transfer_cache.emplace(key, std::move(by_block)).first;
          }
          transfer = it->second[i];
        } else if (d > 0) {
          list();
          transfer = 2 * cost.TransferMs(last, m, devs, to);
        }
        std::vector<double>& act = act_by_n[n];
        if (act.empty()) {
          const double act_samples = SamplesPerReplica(m, n);
          act.resize(i);
          for (int ip = i - 1; ip >= 0; --ip)
            act[ip] = cost.ActivationBytes(block_first(ip), last, act_samples);
          act_done.push_back(n);
        }
        std::vector<StageCost>* row = nullptr;
        const std::vector<double>* allreduce = nullptr;  // by ip, when cached apart
        if (symmetric) {
          const uint64_t at = uniform ? static_cast<uint64_t>(cost.DeviceKind(D - d - n)) : offset;
          row = &stage_cache[static_cast<uint64_t>(n) << 20 | at];
          if (row->empty()) {
            StageCost none;
            none.forward_ms = -1;
            row->assign(i, none);
          }
          if (uniform && n > 1) {
            std::vector<double>& ar =
                allreduce_cache[static_cast<uint64_t>(n) << 20 | static_cast<uint64_t>(offset)];
            if (ar.empty()) {
              list();
              ar.resize(i);
              cost.AllReduceMsFrom(std::span<const int>(block_firsts.data(), i), last, devs,
                                   ar.data());
            }
            allreduce = &ar;
          }
        }
        for (int ip = i - 1; ip >= 0; --ip) {
          const int first = block_first(ip);
          StageCost c;
          if (symmetric) {
            StageCost& cached = (*row)[ip];
            if (cached.forward_ms < 0) {
              list();
              cached = EvaluateStage(cost, first, last, devs, m, 0, false, false, uniform);
            }
            c = cached;
            if (allreduce) c.allreduce_ms = c.allreduce_exposed_ms = (*allreduce)[ip];
            c.memory_bytes += k * act[ip];
          } else {
            list();
            c = EvaluateStage(cost, first, last, devs, m, k, false, false, uniform);
          }
          if (enforce_memory && !c.fits()) continue;
          double t =
              std::max(c.forward_ms + c.backward_ms + c.allreduce_ms + c.update_ms, transfer);
          double v = std::max(best[i][d], t);
          if (v < best[ip][d + n]) {
            best[ip][d + n] = v;
            from[ip][d + n] = {i, n};
          }
        }
      }
    }
  }
  int bd = -1;
  for (int d = 1; d <= D; ++d)
    if (best[0][d] < inf && (bd < 0 || best[0][d] < best[0][bd])) bd = d;
  if (bd < 0) return std::nullopt;
  Plan p;
  p.planner = "pipedream";
  p.micro_batch_size = m;
  p.num_micro_batches = M;
  p.global_batch_size = m * M;
  p.schedule = ScheduleKind::kDappleA;
  int i = 0, d = bd;
  while (i < nb) {
    auto [ni, n] = from[i][d];
    StagePlan s;
    s.first_layer = block_first(i);
    s.last_layer = ends[ni - 1];
    for (int x = D - d; x < D - d + n; ++x) s.devices.push_back(x);
    p.stages.push_back(std::move(s));
    i = ni;
    d -= n;
  }
  return p;
}

}  // namespace dapple
