// Seeded random small planning problems on mixed clusters: the
// analytic cost model on a random chain profile and two servers whose devices differ in
// speed (1 and 1.5-3, the fast server first or second) and sometimes in memory.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>
#include <random>
#include <string>

#include "dapple/cost/analytic_cost_model.h"
#include "plan/random_problems.h"

namespace dapple::testing {

// Up to 10 layers, 2 servers of 1-4 devices each (not always as many), global batch 4, 8
// or 16. `memory_bytes` is the smaller of the two servers' device memories.
inline std::unique_ptr<RandomProblem> MakeRandomMixedProblem(unsigned seed) {
  std::mt19937 rng(seed * 104729u + 31u);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  auto owner = std::make_unique<RandomProblem>();
  RandomProblem& p = *owner;
  const int layers = pick(2, 10);
  const int fast_devices = pick(1, 4), slow_devices = pick(1, 4);
  const double fast_speed = uni(1.5, 3.0);
  const bool fast_first = pick(0, 1) == 1;
  p.profile.model = "random-mixed";
  p.profile.batch_size = 4;
  double params = 0, acts = 0;
  AppendRandomLayers(rng, layers, /*updates=*/true, p.profile, &params, &acts);
  Cluster& c = p.cluster;
  c.name = "random-mixed";
  const double memory = (params * 4 + acts) * uni(0.3, 1.5);
  // The fast devices have the same memory, or (one problem in three) half or twice as much.
  const double fast_memory = memory * std::array<double, 3>{1.0, 0.5, 2.0}[pick(0, 2)];
  ServerSpec fast{fast_devices, DeviceSpec{fast_memory, fast_speed}};
  ServerSpec slow{slow_devices, std::nullopt};
  c.servers =
      fast_first ? std::vector<ServerSpec>{fast, slow} : std::vector<ServerSpec>{slow, fast};
  c.device = DeviceSpec{memory, 1.0};
  c.intra_server = LinkSpec{25e9, 0};
  c.inter_server = LinkSpec{uni(1e9, 12.5e9), uni(0, 1) < 0.5 ? 0.0 : 20e-6};
  p.memory_bytes = std::min(memory, fast_memory);
  const int batches[] = {4, 8, 16};
  p.global_batch = batches[pick(0, 2)];
  p.cost = std::make_unique<AnalyticCostModel>(p.profile, p.cluster);
  p.description = fmt::format(
      "mixed seed {}: {} layers, {} devices of speed {:.2f} ({:.2g} B) {} {} of speed 1 "
      "({:.2g} B), GBS {}",
      seed, layers, fast_devices, fast_speed, fast_memory, fast_first ? "before" : "after",
      slow_devices, memory, p.global_batch);
  return owner;
}

// The three kinds in turn by seed: fake costs, the analytic model, mixed devices.
inline std::unique_ptr<RandomProblem> MakeRandomProblemOfAnyKind(unsigned seed) {
  return seed % 3 == 0   ? MakeRandomProblem(seed)
         : seed % 3 == 1 ? MakeRandomAnalyticProblem(seed)
                         : MakeRandomMixedProblem(seed);
}

// The first problem of any kind, from `seed` on in steps of 1000, with at most `max_layers`
// layers and `max_devices` devices (problems a brute force finishes in about a second).
inline std::unique_ptr<RandomProblem> SmallRandomProblem(unsigned seed, int max_layers,
                                                         int max_devices) {
  for (unsigned s = seed;; s += 1000) {
    auto p = MakeRandomProblemOfAnyKind(s);
    if (p->cost->num_layers() <= max_layers && p->cluster.num_devices() <= max_devices) return p;
  }
}

}  // namespace dapple::testing
