// The simulator's contention-free pass (Note [Transfers that never meet] in
// sim/event_engine.cc) against the event queue alone, on seeded random plans: every schedule,
// replicated stages (split-concat transfers), re-computation, allreduce overlap, shared
// compute, links shared by several routes and transfers that take no time. The results must
// be equal to the last bit, whichever way the run went, and both ways must occur.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "dapple/cost/analytic_cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/profile.h"
#include "dapple/sim/link_log.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"

namespace dapple {
namespace {

struct RandomCase {
  Profile profile;
  Cluster cluster;
  std::unique_ptr<CostModel> cost;
  Plan plan;
};

// Up to 12 layers on 1-3 servers of 1-4 devices; the analytic model (links inside and
// between servers, sometimes shared compute) or a fake whose transfers all hold the same
// few resources (every route contends, some transfers take 0 ms).
std::unique_ptr<RandomCase> MakeCase(unsigned seed) {
  std::mt19937 rng(seed);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  auto c = std::make_unique<RandomCase>();
  const int L = pick(2, 12), servers = pick(1, 3), per_server = pick(1, 4);
  const int D = servers * per_server;
  for (int s = 0; s < servers; ++s) c->cluster.servers.push_back(ServerSpec{per_server, {}});
  c->cluster.name = "random";
  c->profile.model = "random";
  c->profile.batch_size = 4;
  for (int i = 0; i < L; ++i) {
    LayerProfile l;
    l.id = "l" + std::to_string(i);
    l.name = l.id;
    l.forward_ms = uni(0.2, 6.0);
    l.backward_ms = l.forward_ms * uni(1.0, 3.0);
    l.activation_bytes = uni(0.1e6, 200e6);
    l.parameter_bytes = uni(1e6, 300e6);
    l.update_ms = pick(0, 2) == 0 ? 0.0 : uni(0.0, 3.0);
    c->profile.layers.push_back(l);
  }
  // Whole milliseconds and cuts of no bytes make transfers start at the same instant, some
  // taking no time.
  if (pick(0, 2) == 0) {
    for (LayerProfile& l : c->profile.layers) {
      l.forward_ms = std::round(l.forward_ms);
      l.backward_ms = std::round(l.backward_ms);
      l.update_ms = std::round(l.update_ms);
      if (pick(0, 2) == 0) l.activation_bytes = 0;
    }
  }
  if (pick(0, 3) > 0) {
    c->cluster.intra_server = LinkSpec{uni(2e9, 25e9), pick(0, 1) ? 0.0 : 5e-6};
    c->cluster.inter_server = LinkSpec{uni(0.3e9, 12.5e9), pick(0, 1) ? 0.0 : 20e-6};
    c->cluster.device.memory_bytes = 1e12;
    if (pick(0, 4) == 0) {
      c->cluster.shared_compute = uni(1.0, D);
      c->cluster.shared_compute_resume_s = uni(0, 1e-3);
      c->cluster.shared_compute_wake_s = uni(0, 1e-3);
      c->cluster.inter_server.compute_load = uni(0, 1);
    }
    c->cost = std::make_unique<AnalyticCostModel>(c->profile, c->cluster);
  } else {
    auto fake = std::make_unique<FakeCostModel>(L, D);
    for (int i = 0; i < L; ++i) {
      fake->fwd_ms[i] = c->profile.layers[i].forward_ms;
      fake->bwd_ms[i] = c->profile.layers[i].backward_ms;
      fake->update_ms[i] = c->profile.layers[i].update_ms;
    }
    fake->transfer_ms = pick(0, 2) == 0 ? 0.0 : uni(0.0, 3.0);
    fake->transfer_ms_per_sample = pick(0, 1) ? 0.0 : uni(0.0, 0.5);
    for (int r = 0; r < 3; ++r)
      if (r == 0 || pick(0, 1)) fake->transfer_resources.push_back(r);
    fake->allreduce_ms = uni(0.0, 10.0);
    c->cost = std::move(fake);
  }

  // The plan: G device groups of v chunks each over the layers in order, each group on
  // 1-3 devices of a shuffle (some left unused).
  Plan& p = c->plan;
  const std::vector<ScheduleKind> kinds = {ScheduleKind::kDappleA, ScheduleKind::kDappleB,
                                           ScheduleKind::kZbH1, ScheduleKind::kGPipe,
                                           ScheduleKind::kInterleaved};
  p.schedule = kinds[pick(0, 4)];
  const int G = pick(1, std::min(L, D));
  int v = 1;
  if (p.schedule == ScheduleKind::kInterleaved && G > 1)
    v = std::max(1, std::min(pick(2, 3), L / G));
  std::vector<int> devices(D);
  for (int d = 0; d < D; ++d) devices[d] = d;
  std::shuffle(devices.begin(), devices.end(), rng);
  std::vector<std::vector<int>> groups(G);
  int next = 0, widest = 1;
  for (int g = 0; g < G; ++g) {
    const int room = D - next - (G - 1 - g);  // leave one for each group after
    const int n = pick(1, std::max(1, std::min(3, room)));
    groups[g].assign(devices.begin() + next, devices.begin() + next + n);
    next += n;
    widest = std::max(widest, n);
  }
  const int V = G * v;
  std::vector<int> cuts(L - 1);  // chunk k ends after layer ends[k]
  for (int i = 0; i < L - 1; ++i) cuts[i] = i;
  std::shuffle(cuts.begin(), cuts.end(), rng);
  cuts.resize(V - 1);
  std::sort(cuts.begin(), cuts.end());
  cuts.push_back(L - 1);
  for (int k = 0, first = 0; k < V; ++k) {
    StagePlan st;
    st.first_layer = first;
    st.last_layer = cuts[k];
    st.devices = groups[k % G];
    st.recompute = pick(0, 3) == 0;
    first = cuts[k] + 1;
    p.stages.push_back(st);
  }
  p.virtual_stages = v;
  p.micro_batch_size = pick(widest, widest + 4);
  p.num_micro_batches = v > 1 ? G * pick(1, 4) : pick(1, 16);
  p.global_batch_size = p.micro_batch_size * p.num_micro_batches;
  p.allreduce_overlap = pick(0, 1) == 1;
  p.planner = "test";
  return c;
}

TEST(ContentionFree, EqualsTheEventQueueToTheLastBit) {
  int contended = 0, free = 0;
  const int kCases = 600;
  for (unsigned seed = 1; seed <= kCases; ++seed) {
    auto c = MakeCase(seed);
    SimResult fast = SimulatePlan(c->plan, *c->cost, {.record_timeline = false});
    SimResult queue =
        SimulatePlan(c->plan, *c->cost, {.record_timeline = false, .event_queue_only = true});
    ASSERT_TRUE(queue.link_contention);
    (fast.link_contention ? contended : free)++;
    SCOPED_TRACE("seed " + std::to_string(seed));
    ASSERT_EQ(fast.iteration_ms, queue.iteration_ms);
    ASSERT_EQ(fast.bubble_fraction, queue.bubble_fraction);
    ASSERT_EQ(fast.instructions, queue.instructions);
    ASSERT_EQ(fast.devices.size(), queue.devices.size());
    for (size_t d = 0; d < fast.devices.size(); ++d) {
      ASSERT_EQ(fast.devices[d].busy_ms, queue.devices[d].busy_ms);
      ASSERT_EQ(fast.devices[d].peak_memory_bytes, queue.devices[d].peak_memory_bytes);
      ASSERT_EQ(fast.devices[d].peak_in_flight, queue.devices[d].peak_in_flight);
    }
    for (size_t s = 0; s < fast.stages.size(); ++s)
      ASSERT_EQ(fast.stages[s].allreduce_exposed_ms, queue.stages[s].allreduce_exposed_ms);
    // With a timeline the event queue runs: the same times again.
    SimResult traced = SimulatePlan(c->plan, *c->cost);
    ASSERT_EQ(traced.iteration_ms, fast.iteration_ms);
  }
  // Both ways were taken, often.
  EXPECT_GT(contended, kCases / 10);
  EXPECT_GT(free, kCases / 10);
}

// Two routes on one link (resource 0) and a third on a link of its own (resource 1);
// `held` lists each route's transfers, [start, finish).
bool Meet(const std::vector<std::vector<std::pair<double, double>>>& held) {
  internal::EngineSetup setup;
  setup.routes.resize(3);
  setup.routes[0].resources = {0};
  setup.routes[1].resources = {0};
  setup.routes[2].resources = {1};
  setup.num_resources = 2;
  internal::LinkLog log;
  log.Reset(setup, 4);
  bool alone = true;
  for (int r = 0; r < 3; ++r)
    for (const auto& [start, finish] : held[r]) alone = log.Add(r, start, finish) && alone;
  return !alone;
}

TEST(ContentionFree, WhenTransfersMeet) {
  // One after the other, on one route or two: a finish frees the link for a start then.
  EXPECT_FALSE(Meet({{{0, 1}, {1, 2}}, {{2, 3}}, {}}));
  EXPECT_FALSE(Meet({{{0, 1}, {2, 3}}, {{1, 2}, {3, 3}}, {}}));
  // Overlapping, on one route or two.
  EXPECT_TRUE(Meet({{{0, 1}, {0.5, 2}}, {}, {}}));
  EXPECT_TRUE(Meet({{{0, 2}}, {{1, 3}}, {}}));
  EXPECT_TRUE(Meet({{{1, 3}}, {{0, 2}}, {}}));
  // At the same instant, even when one takes no time: the event queue lets the one first
  // in its order go first, and the other may wait for it.
  EXPECT_TRUE(Meet({{{0, 0}}, {{0, 1}}, {}}));
  EXPECT_TRUE(Meet({{{0, 1}}, {{0, 0}}, {}}));
  // Inside another's time, taking none.
  EXPECT_TRUE(Meet({{{0, 2}}, {{1, 1}}, {}}));
  // On different links they never meet.
  EXPECT_FALSE(Meet({{{0, 2}}, {}, {{1, 3}}}));
}

}  // namespace
}  // namespace dapple
