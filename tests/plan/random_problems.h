// Seeded random small planning problems for the planner tests, on 1-2 servers: a fake
// cost model with random layer costs, transfers, allreduce and memory (placement does not
// matter to it), or the analytic model on a random chain profile and a random cluster
// (placement matters: NVLink inside a server, a slower network between).
#pragma once

#include <fmt/format.h>

#include <memory>
#include <random>
#include <string>

#include "dapple/cost/analytic_cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/profile.h"
#include "fakes/fake_cost_model.h"

namespace dapple::testing {

struct RandomProblem {
  Profile profile;  // the layer ids and names (the fake carries the costs)
  Cluster cluster;
  std::unique_ptr<CostModel> cost;
  double memory_bytes = 0;  // every device's
  int global_batch = 1;
  std::string description;
};

// A fake-cost problem of `layers` layers on `servers` servers of `per_server` devices,
// drawn from `rng` in a fixed order (per layer forward, backward, activation and parameter
// bytes; transfers, allreduce, memory); the global batch and updates are the caller's.
inline FakeCostModel& FillRandomFakeProblem(std::mt19937& rng, int layers, int servers,
                                            int per_server, const char* name, RandomProblem& p) {
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  p.cluster.name = name;
  for (int s = 0; s < servers; ++s) p.cluster.servers.push_back(ServerSpec{per_server, {}});
  p.profile.model = name;
  p.profile.batch_size = 1;
  for (int i = 0; i < layers; ++i) {
    LayerProfile l;
    l.id = fmt::format("l{}", i);
    l.name = fmt::format("layer{}", i);
    p.profile.layers.push_back(l);
  }
  auto fake = std::make_unique<FakeCostModel>(layers, servers * per_server);
  FakeCostModel& c = *fake;
  double params = 0, acts = 0;
  for (int i = 0; i < layers; ++i) {
    c.fwd_ms[i] = uni(0.2, 4.0);
    c.bwd_ms[i] = c.fwd_ms[i] * uni(1.0, 3.0);
    c.act_bytes[i] = uni(1e6, 50e6);
    c.param_bytes[i] = uni(1e6, 200e6);
    params += c.param_bytes[i];
    acts += c.act_bytes[i];
  }
  c.transfer_ms = uni(0.0, 1.0) < 0.3 ? 0.0 : uni(0.0, 2.0);
  c.transfer_ms_per_sample = uni(0.0, 0.3);
  c.allreduce_ms = uni(0.0, 1.0) < 0.2 ? 0.0 : uni(0.0, 20.0);
  // Memory from "everything fits on one device" down to "the model must be split".
  c.memory_bytes = (params * c.state_factor + 4 * acts) * uni(0.3, 1.5);
  p.memory_bytes = c.memory_bytes;
  p.cost = std::move(fake);
  return c;
}

// Optimizer updates of the fake model `c`, 0 in about 3 of 10 layers.
inline void DrawRandomUpdates(std::mt19937& rng, FakeCostModel& c) {
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  for (double& u : c.update_ms) u = uni(0.0, 1.0) < 0.3 ? 0.0 : uni(0.0, 3.0);
}

// Up to 10 layers, up to 8 devices on 1 or 2 servers, global batch 4, 8 or 16.
inline std::unique_ptr<RandomProblem> MakeRandomProblem(unsigned seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  auto owner = std::make_unique<RandomProblem>();
  RandomProblem& p = *owner;
  const int layers = pick(2, 10);
  const int servers = pick(1, 2);
  const int per_server = pick(1, 4);
  FakeCostModel& c = FillRandomFakeProblem(rng, layers, servers, per_server, "random", p);
  const int batches[] = {4, 8, 16};
  p.global_batch = batches[pick(0, 2)];
  // Optimizer updates, drawn last so the other draws stay those of earlier versions.
  DrawRandomUpdates(rng, c);
  p.description = "seed " + std::to_string(seed) + ": " + std::to_string(layers) + " layers, " +
                  std::to_string(servers) + "x" + std::to_string(per_server) + " devices, GBS " +
                  std::to_string(p.global_batch);
  return owner;
}

// Appends `layers` random chain layers (ids l0, l1, ...) to `profile`, drawn from `rng` in a
// fixed order (forward, backward, activation, parameter bytes; with `updates` also the
// update time, 0 in about 3 of 10), and adds their parameter and activation bytes to
// *params and *acts.
inline void AppendRandomLayers(std::mt19937& rng, int layers, bool updates, Profile& profile,
                               double* params, double* acts) {
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  for (int i = 0; i < layers; ++i) {
    LayerProfile l;
    l.id = fmt::format("l{}", i);
    l.name = fmt::format("layer{}", i);
    l.forward_ms = uni(0.5, 8.0);
    l.backward_ms = l.forward_ms * uni(1.0, 3.0);
    l.activation_bytes = uni(0.5e6, 80e6);
    l.parameter_bytes = uni(1e6, 400e6);
    if (updates) l.update_ms = uni(0.0, 1.0) < 0.3 ? 0.0 : uni(0.0, 6.0);
    *params += l.parameter_bytes;
    *acts += l.activation_bytes;
    profile.layers.push_back(l);
  }
}

// The same sizes with the analytic cost model: a random chain profile (PBS 4) and a
// cluster with 25 GB/s inside servers and 1-12.5 GB/s between them.
inline std::unique_ptr<RandomProblem> MakeRandomAnalyticProblem(unsigned seed) {
  std::mt19937 rng(seed * 7919u + 17u);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  auto owner = std::make_unique<RandomProblem>();
  RandomProblem& p = *owner;
  const int layers = pick(2, 10);
  const int servers = pick(1, 2);
  const int per_server = pick(1, 4);
  p.profile.model = "random-analytic";
  p.profile.batch_size = 4;
  double params = 0, acts = 0;
  AppendRandomLayers(rng, layers, /*updates=*/false, p.profile, &params, &acts);
  Cluster& c = p.cluster;
  c.name = "random-analytic";
  for (int s = 0; s < servers; ++s) c.servers.push_back(ServerSpec{per_server, {}});
  c.intra_server = LinkSpec{25e9, 0};
  c.inter_server = LinkSpec{uni(1e9, 12.5e9), uni(0, 1) < 0.5 ? 0.0 : 20e-6};
  c.device.speed = 1.0;
  c.device.memory_bytes = (params * 4 + acts) * uni(0.3, 1.5);
  p.memory_bytes = c.device.memory_bytes;
  const int batches[] = {4, 8, 16};
  p.global_batch = batches[pick(0, 2)];
  // Optimizer updates, drawn last so the other draws stay those of earlier versions.
  for (LayerProfile& l : p.profile.layers) l.update_ms = uni(0.0, 1.0) < 0.3 ? 0.0 : uni(0.0, 6.0);
  p.cost = std::make_unique<AnalyticCostModel>(p.profile, p.cluster);
  p.description = "analytic seed " + std::to_string(seed) + ": " + std::to_string(layers) +
                  " layers, " + std::to_string(servers) + "x" + std::to_string(per_server) +
                  " devices, GBS " + std::to_string(p.global_batch);
  return owner;
}

}  // namespace dapple::testing
