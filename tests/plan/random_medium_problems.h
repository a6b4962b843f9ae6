// Seeded random medium planning problems: 10-12 layers on 2 servers of 5 or 6 devices,
// global batch 24-72, where servers do not divide evenly into the stage widths a balanced
// pipeline wants. Fake costs (random layer costs; placement does not matter to them), the
// analytic model on a random chain profile (NVLink-like inside a server, a slower network
// between), and the analytic model on two servers of different speeds.
#pragma once

#include <fmt/format.h>

#include <array>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "plan/random_problems.h"

namespace dapple::testing {

// Global batches with many divisors (every one a micro-batch size the planner tries).
inline int MediumGlobalBatch(std::mt19937& rng) {
  constexpr std::array<int, 6> kBatches = {24, 30, 36, 48, 60, 72};
  return kBatches[std::uniform_int_distribution<int>(0, kBatches.size() - 1)(rng)];
}

// Per layer: whether the profile times its forward (may a stage re-compute), as the planner
// decides it: the exhaustive search's argument on these problems.
inline std::vector<bool> ForwardTimedLayers(const Profile& profile) {
  std::vector<bool> timed;
  for (const LayerProfile& l : profile.layers) timed.push_back(l.forward_ms > 0);
  return timed;
}

// Fake costs: like MakeRandomProblem's, on 2 servers of 5 or 6 devices.
inline std::unique_ptr<RandomProblem> MakeMediumProblem(unsigned seed, int layers = 10) {
  std::mt19937 rng(seed * 2654435761u + 7u);
  auto owner = std::make_unique<RandomProblem>();
  RandomProblem& p = *owner;
  const int per_server = std::uniform_int_distribution<int>(5, 6)(rng);
  FakeCostModel& c = FillRandomFakeProblem(rng, layers, 2, per_server, "random-medium", p);
  p.global_batch = MediumGlobalBatch(rng);
  DrawRandomUpdates(rng, c);
  p.description = fmt::format("medium seed {}: {} layers, 2x{} devices, GBS {}", seed, layers,
                              per_server, p.global_batch);
  return owner;
}

// The analytic model on a random chain profile (PBS 4) and 2 servers of 5 or 6 devices
// of speed 1, or (with `mixed`) of speed 1 and 1.5-2.5, the slow one listed first (with
// `fast_listed_first`, the fast one: the same problem, the servers listed the other way).
inline std::unique_ptr<RandomProblem> MakeMediumAnalyticProblem(unsigned seed, bool mixed = false,
                                                                int layers = 10,
                                                                bool fast_listed_first = false) {
  std::mt19937 rng(seed * 40503u + (mixed ? 101u : 13u));
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto owner = std::make_unique<RandomProblem>();
  RandomProblem& p = *owner;
  const int per_server = std::uniform_int_distribution<int>(5, 6)(rng);
  p.profile.model = "random-medium-analytic";
  p.profile.batch_size = 4;
  double params = 0, acts = 0;
  AppendRandomLayers(rng, layers, /*updates=*/true, p.profile, &params, &acts);
  Cluster& c = p.cluster;
  c.name = mixed ? "random-medium-mixed" : "random-medium-analytic";
  const double memory = (params * 4 + acts) * uni(0.3, 1.5);
  c.device = DeviceSpec{memory, 1.0};
  const double fast_speed = uni(1.5, 2.5);
  c.servers = {
      ServerSpec{per_server, {}},
      ServerSpec{per_server, mixed ? std::optional(DeviceSpec{memory, fast_speed}) : std::nullopt}};
  if (fast_listed_first) std::swap(c.servers[0], c.servers[1]);
  c.intra_server = LinkSpec{25e9, 0};
  c.inter_server = LinkSpec{uni(1e9, 12.5e9), uni(0, 1) < 0.5 ? 0.0 : 20e-6};
  p.memory_bytes = memory;
  p.global_batch = MediumGlobalBatch(rng);
  p.cost = std::make_unique<AnalyticCostModel>(p.profile, p.cluster);
  p.description = fmt::format(
      "medium {} seed {}: {} layers, 2x{} devices{}, GBS {}", mixed ? "mixed" : "analytic", seed,
      layers, per_server,
      mixed ? fmt::format(" (server {} speed {:.2f})", fast_listed_first ? 0 : 1, fast_speed) : "",
      p.global_batch);
  return owner;
}

}  // namespace dapple::testing
