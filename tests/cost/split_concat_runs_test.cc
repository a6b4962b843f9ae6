// Note [Split-concat by server runs]: when a layer's bytes per sample are a whole number,
// TransferMs counts samples by runs of devices on one server (and answers a transfer asked
// again at another layer from those counts); it must equal, to the last bit, the walk over
// the slices that Transfer (which lists the link resources) takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "dapple/cost/analytic_cost_model.h"

namespace dapple {
namespace {

TEST(SplitConcatRuns, CountsByRunsGiveTheWalksFigure) {
  std::mt19937 rng(23);
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  long long checked = 0, whole = 0;
  for (int t = 0; t < 400; ++t) {
    Profile p;
    p.model = "random";
    p.batch_size = pick(1, 4);
    const int layers = 5;
    for (int i = 0; i < layers; ++i) {
      LayerProfile l;
      l.id = "l" + std::to_string(i);
      l.forward_ms = 1;
      l.backward_ms = 2;
      // Mostly whole bytes per sample (the runs), some not (the walk), some huge (the
      // walk: m x bytes beyond 2^53).
      const int kind = pick(0, 9);
      l.activation_bytes = kind < 7   ? p.batch_size * static_cast<double>(pick(1, 1 << 24))
                           : kind < 9 ? std::uniform_real_distribution<double>(1e3, 1e7)(rng)
                                      : p.batch_size * 3e15;
      l.parameter_bytes = 1e3;
      p.layers.push_back(l);
    }
    Cluster c;
    c.name = "random";
    const int servers = pick(1, 6);
    for (int s = 0; s < servers; ++s) c.servers.push_back(ServerSpec{pick(1, 8), std::nullopt});
    c.intra_server = LinkSpec{std::uniform_real_distribution<double>(1e9, 5e10)(rng), 1e-6};
    c.inter_server = LinkSpec{std::uniform_real_distribution<double>(1e8, 2e10)(rng), 9e-6};
    AnalyticCostModel cost(p, c);
    std::vector<int> all(c.num_devices());
    std::iota(all.begin(), all.end(), 0);
    for (int u = 0; u < 20; ++u) {
      std::shuffle(all.begin(), all.end(), rng);
      const int n = static_cast<int>(all.size());
      const int rf = pick(1, n), rt = pick(1, n);
      // Receivers may share devices with the senders (a replica feeding itself); lists
      // are sorted (as the planners make them) or not.
      std::vector<int> from(all.begin(), all.begin() + rf);
      std::shuffle(all.begin(), all.end(), rng);
      std::vector<int> to(all.begin(), all.begin() + rt);
      if (pick(0, 3) > 0) {
        std::sort(from.begin(), from.end());
        std::sort(to.begin(), to.end());
      }
      const int mb = pick(0, 3) == 0 ? pick(1, 4) : pick(1, 200);
      std::vector<double> walked(layers);
      for (int last = 0; last < layers; ++last) {
        cost.TransferMs(0, mb + 1, from, to);  // other devices before: the walk, not links
        walked[last] = cost.Transfer(last, mb, from, to).ms;
      }
      for (int last = 0; last < layers; ++last) {
        cost.TransferMs(0, mb + 1, from, to);  // counted afresh
        ASSERT_EQ(cost.TransferMs(last, mb, from, to), walked[last])
            << "t " << t << " u " << u << " layer " << last;
        ++checked;
      }
      for (int last = layers - 1; last >= 0; --last) {  // asked again in a row
        ASSERT_EQ(cost.TransferMs(last, mb, from, to), walked[last])
            << "t " << t << " u " << u << " layer " << last << " again";
        const double b = p.layers[last].activation_bytes / p.batch_size;
        whole += b == std::floor(b) && b * mb <= 9007199254740992.0;
      }
    }
  }
  EXPECT_GT(whole, 20000);  // most by runs
  EXPECT_EQ(checked, 400 * 20 * 5);
}

}  // namespace
}  // namespace dapple
