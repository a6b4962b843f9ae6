// GroupWorkCache, one cache shared by every micro-batch size and width and by threads, against
// the plain computation: each range's forward + backward of the group's largest slice on its
// slowest device, asked of the cost model for every device of the group.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/plan_costs.h"
#include "plan/random_mixed_problems.h"

namespace dapple {
namespace {

struct Asked {
  int m;
  std::vector<int> group;
};

// The table's figures and its shrinks_from_left against the plain computation.
void ExpectPlainTable(const CostModel& cost, const Asked& a, const GroupWorkCache::Table& t) {
  const int n = cost.num_layers();
  const double slice = SamplesPerReplica(a.m, static_cast<int>(a.group.size()));
  bool shrinks = true;
  for (int first = 0; first < n; ++first) {
    for (int last = first; last < n; ++last) {
      double w = 0;
      for (int d : a.group)
        w = std::max(
            w, cost.ForwardMs(first, last, slice, d) + cost.BackwardMs(first, last, slice, d));
      ASSERT_EQ(t.Work(first, last), w)
          << "m " << a.m << " width " << a.group.size() << " layers " << first << ".." << last;
      if (first + 1 <= last) {
        double rest = 0;
        for (int d : a.group)
          rest = std::max(rest, cost.ForwardMs(first + 1, last, slice, d) +
                                    cost.BackwardMs(first + 1, last, slice, d));
        shrinks = shrinks && w >= rest;
      }
    }
  }
  EXPECT_EQ(t.shrinks_from_left, shrinks) << "m " << a.m << " width " << a.group.size();
}

TEST(GroupWorkCache, SharedTablesAreThePlainFigures) {
  for (unsigned seed = 0; seed < 12; ++seed) {
    const auto p = testing::MakeRandomMixedProblem(seed);
    SCOPED_TRACE(p->description);
    std::mt19937 rng(seed);
    const int N = p->cluster.num_devices();
    // Groups of random widths at random places (mixing kinds or not), for m = 1..8.
    std::vector<Asked> asked;
    for (int i = 0; i < 40; ++i) {
      Asked a{1 + static_cast<int>(rng() % 8), {}};
      const int width = 1 + static_cast<int>(rng() % N);
      std::vector<int> devices(N);
      for (int d = 0; d < N; ++d) devices[d] = d;
      std::shuffle(devices.begin(), devices.end(), rng);
      a.group.assign(devices.begin(), devices.begin() + width);
      asked.push_back(std::move(a));
    }
    GroupWorkCache cache;
    // Four threads ask the same list from different points, so that some make one table at
    // once and some find another's.
    std::vector<std::thread> threads;
    std::vector<std::vector<const GroupWorkCache::Table*>> got(4);
    for (size_t k = 0; k < got.size(); ++k)
      threads.emplace_back([&, k] {
        for (size_t i = 0; i < asked.size(); ++i) {
          const Asked& a = asked[(i + 10 * k) % asked.size()];
          got[k].push_back(&cache.TableFor(*p->cost, a.m, a.group));
        }
      });
    for (std::thread& t : threads) t.join();
    for (size_t k = 0; k < got.size(); ++k)
      for (size_t i = 0; i < asked.size(); ++i)
        ExpectPlainTable(*p->cost, asked[(i + 10 * k) % asked.size()], *got[k][i]);
  }
}

}  // namespace
}  // namespace dapple
