// Note [Split-concat by link]: a transfer asked again with the same devices (at another
// layer, say) is summed from its messages grouped by link; it must equal, to the last bit,
// the walk over the slices that a transfer asked for the first time takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "dapple/cost/analytic_cost_model.h"

namespace dapple {
namespace {

TEST(SplitConcatByLink, RepeatedDevicesGiveTheWalksFigureAndResources) {
  std::mt19937 rng(11);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  Profile p;
  p.model = "random";
  p.batch_size = 3;
  for (int i = 0; i < 6; ++i) {
    LayerProfile l;
    l.id = "l" + std::to_string(i);
    l.forward_ms = 1;
    l.backward_ms = 2;
    l.activation_bytes = uni(1e3, 1e7);  // odd sizes: the sums round
    l.parameter_bytes = 1e3;
    p.layers.push_back(l);
  }
  Cluster c;
  c.name = "three-by-five";
  c.servers.assign(3, ServerSpec{5, std::nullopt});
  c.intra_server = LinkSpec{3.3e9, 1e-6};
  c.inter_server = LinkSpec{1.7e9, 7e-6};
  AnalyticCostModel cost(p, c);
  std::vector<int> all(15);
  std::iota(all.begin(), all.end(), 0);
  int grouped = 0;
  for (int t = 0; t < 300; ++t) {
    std::shuffle(all.begin(), all.end(), rng);
    const int rf = std::uniform_int_distribution<int>(1, 7)(rng);
    const int rt = std::uniform_int_distribution<int>(1, 7)(rng);
    std::vector<int> from(all.begin(), all.begin() + rf);
    // Receivers may share devices with the senders (a replica feeding itself).
    const int start = std::uniform_int_distribution<int>(0, rf)(rng);
    std::vector<int> to(all.begin() + start, all.begin() + start + rt);
    std::sort(from.begin(), from.end());
    std::sort(to.begin(), to.end());
    const double mb = std::uniform_int_distribution<int>(1, 40)(rng);
    // The walk: each layer asked right after a transfer with other devices.
    std::vector<TransferCost> walked;
    for (int last = 0; last < 6; ++last) {
      cost.TransferMs(0, mb + 1, from, to);  // other micro-batch: not the same transfer
      walked.push_back(cost.Transfer(last, mb, from, to));
    }
    // By link: every layer asked again in a row.
    cost.TransferMs(0, mb, from, to);
    for (int last = 5; last >= 0; --last) {
      TransferCost again = cost.Transfer(last, mb, from, to);
      ASSERT_EQ(again.ms, walked[last].ms) << "t " << t << ", layer " << last;
      ASSERT_EQ(again.resources, walked[last].resources) << "t " << t << ", layer " << last;
      EXPECT_EQ(cost.TransferMs(last, mb, from, to), walked[last].ms);
      ++grouped;
    }
  }
  EXPECT_GT(grouped, 1000);
}

}  // namespace
}  // namespace dapple
