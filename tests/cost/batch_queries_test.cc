// The cost model's questions asked for many layer ranges at once (AllReduceMsFrom,
// TransferMsAt) must give the figures of the same questions asked one by one, to the last bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "dapple/cost/analytic_cost_model.h"

namespace dapple {
namespace {

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Layers of odd parameter and activation sizes (the sums round) on 3 servers of 5 devices.
struct Problem {
  Profile profile;
  Cluster cluster;
  explicit Problem(std::mt19937& rng) {
    auto uni = [&](double a, double b) {
      return std::uniform_real_distribution<double>(a, b)(rng);
    };
    profile.model = "random";
    profile.batch_size = 3;
    for (int i = 0; i < 9; ++i) {
      LayerProfile l;
      l.id = "l" + std::to_string(i);
      l.forward_ms = uni(0.1, 3);
      l.backward_ms = uni(0.1, 5);
      l.activation_bytes = uni(1e3, 1e7);
      l.parameter_bytes = i % 4 == 3 ? 0.0 : uni(1e3, 1e8);
      profile.layers.push_back(l);
    }
    cluster.name = "three-by-five";
    cluster.servers.assign(3, ServerSpec{5, std::nullopt});
    cluster.intra_server = LinkSpec{3.3e9, 1e-6};
    cluster.inter_server = LinkSpec{1.7e9, 7e-6};
  }
};

std::vector<int> RandomDevices(std::mt19937& rng, int max_size) {
  std::vector<int> all(15);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(std::uniform_int_distribution<int>(1, max_size)(rng));
  if (rng() % 2) std::sort(all.begin(), all.end());
  return all;
}

TEST(BatchQueries, AllReduceFromEveryFirstIsAllReduceMs) {
  std::mt19937 rng(5);
  Problem pr(rng);
  AnalyticCostModel cost(pr.profile, pr.cluster);
  for (int t = 0; t < 500; ++t) {
    const std::vector<int> devs = RandomDevices(rng, 15);
    const int last = std::uniform_int_distribution<int>(0, 8)(rng);
    std::vector<int> firsts;
    for (int f = last; f >= 0; --f)
      if (rng() % 3) firsts.push_back(f);
    std::vector<double> out(firsts.size(), -1.0);
    cost.AllReduceMsFrom(firsts, last, devs, out.data());
    for (size_t j = 0; j < firsts.size(); ++j) {
      // Asked alone, after a ring of other devices (no kept ring).
      cost.AllReduceMs(0, 0, RandomDevices(rng, 15));
      const double want = cost.AllReduceMs(firsts[j], last, devs);
      ASSERT_TRUE(SameBits(out[j], want)) << "t " << t << ": " << out[j] << " vs " << want;
    }
    // The interface's default asks AllReduceMs for each first.
    std::vector<double> by_default(firsts.size(), -1.0);
    cost.CostModel::AllReduceMsFrom(firsts, last, devs, by_default.data());
    for (size_t j = 0; j < firsts.size(); ++j) ASSERT_TRUE(SameBits(by_default[j], out[j]));
  }
}

TEST(BatchQueries, TransferAtEveryBoundaryIsTransferMs) {
  std::mt19937 rng(7);
  Problem pr(rng);
  // Whole bytes per sample at some boundaries (Note [Split-concat by server runs]).
  pr.profile.layers[2].activation_bytes = 3 * 1000;
  pr.profile.layers[5].activation_bytes = 3 * 4096;
  AnalyticCostModel cost(pr.profile, pr.cluster);
  for (int t = 0; t < 500; ++t) {
    const std::vector<int> from = RandomDevices(rng, 7), to = RandomDevices(rng, 7);
    const double mb = std::uniform_int_distribution<int>(1, 40)(rng);
    std::vector<int> lasts;
    for (int l = 0; l < 9; ++l)
      if (rng() % 3) lasts.push_back(l);
    if (rng() % 2) std::reverse(lasts.begin(), lasts.end());
    std::vector<double> out(lasts.size(), -1.0);
    cost.TransferMsAt(lasts, mb, from, to, out.data());
    for (size_t j = 0; j < lasts.size(); ++j) {
      cost.TransferMs(0, mb + 1, from, to);  // other devices before: the walk
      const double want = cost.TransferMs(lasts[j], mb, from, to);
      ASSERT_TRUE(SameBits(out[j], want)) << "t " << t << ": " << out[j] << " vs " << want;
    }
  }
}

}  // namespace
}  // namespace dapple
