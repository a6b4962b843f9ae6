// A uniform planning problem for the planner tests: `layers` equal layers (f = 1, b = 2 ms per
// sample, 1 MB of activations and 4 MB of weights and optimizer state each) on one server of
// 4 devices, an allreduce so dear that no stage is replicated, free transfers, no forward
// times in the profile (so no re-computation), GBS 8.
#pragma once

#include <fmt/format.h>

#include <optional>

#include "dapple/plan/planner.h"
#include "fakes/fake_cost_model.h"

namespace dapple::testing {

struct UniformProblem {
  static constexpr int kDevices = 4, kGlobalBatch = 8;
  FakeCostModel cost;
  Profile profile;
  Cluster cluster;
  explicit UniformProblem(int layers = 16) : cost(layers, kDevices) {
    cost.allreduce_ms = 1000;
    profile.model = "uniform";
    profile.batch_size = 1;
    for (int i = 0; i < layers; ++i) {
      LayerProfile l;
      l.id = fmt::format("l{}", i);
      profile.layers.push_back(l);
    }
    cluster.name = "four";
    cluster.servers = {ServerSpec{kDevices, {}}};
  }
  PlanResult Plan(std::optional<ScheduleKind> schedule = std::nullopt,
                  bool steady_state = false) const {
    PlannerOptions o;
    o.schedule = schedule;
    o.steady_state = steady_state;
    return RunPlanner(profile, cluster, cost, kGlobalBatch, o);
  }
};

}  // namespace dapple::testing
