// The DP's canonical states (Note [Canonical usage states]) against a reference key (the
// sorted usage vector in an ordered map), and the DP's plans, whose suffixes it keeps
// without copies (Note [Suffixes without copies]), against EvaluatePlan recomputing them.
#include "dapple/plan/dp/dp_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "dapple/cost/analytic_cost_model.h"
#include "dapple/plan/dp/dapple_dp.h"
#include "dapple/plan/plan_costs.h"
#include "dapple/plan/planner.h"
#include "random_problems.h"

namespace dapple {
namespace {

Cluster AlikeServers(int servers, int devices) {
  Cluster c;
  c.name = "test";
  c.servers.assign(servers, ServerSpec{devices, std::nullopt});
  return c;
}

TEST(UsageKeys, PermutedUsagesAreOneStateOnIdenticalServers) {
  UsageKeys keys(AlikeServers(4, 4));
  ASSERT_TRUE(keys.symmetric());
  const int a = keys.IdOf({1, 0, 3, 0});
  EXPECT_EQ(a, 0);
  EXPECT_EQ(keys.IdOf({0, 3, 0, 1}), a);
  EXPECT_EQ(keys.IdOf({3, 1, 0, 0}), a);
  EXPECT_EQ(keys.IdOf({1, 1, 2, 0}), 1);  // same total, another multiset
  EXPECT_EQ(keys.IdOf({0, 0, 0, 4}), 2);
  EXPECT_EQ(keys.size(), 3u);
  // The key: how many servers have k devices taken, k = 0..4.
  EXPECT_EQ(keys.KeyOf({1, 0, 3, 0}), (std::vector<int>{2, 1, 0, 1, 0}));
}

TEST(UsageKeys, ServersOfDifferentDevicesAreNotInterchangeable) {
  Cluster c = AlikeServers(2, 4);
  DeviceSpec fast = c.device;
  fast.speed = 2;
  c.servers[0].device = fast;
  UsageKeys keys(c);
  EXPECT_FALSE(keys.symmetric());
  EXPECT_EQ(keys.IdOf({1, 0}), 0);
  EXPECT_EQ(keys.IdOf({0, 1}), 1);
  EXPECT_EQ(keys.IdOf({1, 0}), 0);
  EXPECT_EQ(keys.KeyOf({3, 1}), (std::vector<int>{3, 1}));
}

// Ids equal those of the reference key, the sorted usage (the same multiset) given ids in
// the order first seen, on random usages of identical servers; and the usage itself on a
// mixed cluster.
TEST(UsageKeys, IdsEqualTheSortedMultisetReference) {
  std::mt19937 rng(7);
  for (bool mixed : {false, true}) {
    Cluster c = AlikeServers(6, 4);
    if (mixed) {
      DeviceSpec slow = c.device;
      slow.speed = 0.5;
      c.servers[5].device = slow;
    }
    UsageKeys keys(c);
    std::map<std::vector<int>, int> reference;
    for (int t = 0; t < 2000; ++t) {
      std::vector<int> usage(6);
      for (int& u : usage) u = std::uniform_int_distribution<int>(0, 4)(rng);
      std::vector<int> key = usage;
      if (!mixed) std::sort(key.begin(), key.end());
      const int expected =
          reference.try_emplace(key, static_cast<int>(reference.size())).first->second;
      ASSERT_EQ(keys.IdOf(usage), expected) << "draw " << t << (mixed ? " (mixed)" : "");
    }
    EXPECT_EQ(keys.size(), reference.size());
  }
}

// Every DP candidate is a valid plan (contiguous stages over every layer, disjoint devices,
// at most m replicas) whose L, as EvaluatePlan recomputes it from the plan alone, is the
// DP's, in ascending order; on random problems with 2-4 identical servers, where states
// of permuted usages are merged.
// Note [Usages by incremental hash]: the hash moved server by server equals the hash of
// the new usage, and the table finds each usage's own value (against an ordered map).
TEST(UsageTable, IncrementalHashAndValuesByUsage) {
  std::mt19937 rng(9);
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  Cluster c;
  c.name = "mixed-sizes";
  for (int s = 0; s < 12; ++s) c.servers.push_back(ServerSpec{pick(1, 4), std::nullopt});
  UsageHasher hasher(c);
  UsageTable<int> table;
  std::map<std::vector<int>, int> reference;
  for (int t = 0; t < 20000; ++t) {
    std::vector<int> usage(c.num_servers());
    for (int s = 0; s < c.num_servers(); ++s) usage[s] = pick(0, c.servers[s].devices);
    uint64_t h = hasher.Of(usage);
    const int s = pick(0, c.num_servers() - 1);
    const int to = pick(0, c.servers[s].devices);
    h = hasher.Moved(h, s, usage[s], to);
    usage[s] = to;
    ASSERT_EQ(h, hasher.Of(usage));
    int& v = table.At(h, usage);
    auto [it, added] = reference.try_emplace(usage, t + 1);
    if (added) {
      ASSERT_EQ(v, 0);  // new
      v = t + 1;
    }
    ASSERT_EQ(v, it->second);
    // Another usage under the same hash (a collision) gets a value of its own.
    std::vector<int> other = usage;
    other[0] = other[0] == 0 ? 1 : 0;
    if (other[0] <= c.servers[0].devices && !reference.count(other)) {
      ASSERT_EQ(table.At(h, other), 0);
      ASSERT_EQ(table.At(h, usage), it->second);
    }
  }
  EXPECT_GT(reference.size(), 1000u);
}

TEST(DappleDp, CandidatesAreValidPlansWithTheLatencyTheDpComputed) {
  int checked = 0;
  for (unsigned seed = 0; seed < 40; ++seed) {
    auto p = testing::MakeRandomAnalyticProblem(seed);
    std::mt19937 rng(seed);
    p->cluster.servers.assign(std::uniform_int_distribution<int>(2, 4)(rng),
                              ServerSpec{std::uniform_int_distribution<int>(1, 3)(rng), {}});
    p->description +=
        fmt::format(" on {} x {} instead", p->cluster.num_servers(), p->cluster.servers[0].devices);
    AnalyticCostModel cost(p->profile, p->cluster);
    for (int m : MicroBatchSizes(p->global_batch)) {
      DpOptions o;
      o.micro_batch_size = m;
      o.num_micro_batches = p->global_batch / m;
      std::vector<DpCandidate> cands = DappleDp(cost, p->cluster, o);
      double prev = 0;
      for (const DpCandidate& cand : cands) {
        const Plan& plan = cand.plan;
        int next_layer = 0;
        std::set<int> used;
        for (const StagePlan& st : plan.stages) {
          EXPECT_EQ(st.first_layer, next_layer) << p->description;
          next_layer = st.last_layer + 1;
          EXPECT_LE(st.replicas(), m);
          for (int d : st.devices) {
            EXPECT_TRUE(d >= 0 && d < p->cluster.num_devices());
            EXPECT_TRUE(used.insert(d).second) << p->description << ": device " << d << " twice";
          }
        }
        EXPECT_EQ(next_layer, p->profile.num_layers());
        const double l = EvaluatePlan(plan, cost).latency.latency_ms;
        EXPECT_NEAR(cand.latency_ms, l, 1e-9 * l) << p->description << ", m = " << m;
        EXPECT_GE(cand.latency_ms, prev);
        prev = cand.latency_ms;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 500);
}

}  // namespace
}  // namespace dapple
