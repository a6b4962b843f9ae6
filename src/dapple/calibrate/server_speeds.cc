#include "dapple/calibrate/server_speeds.h"

#include <algorithm>
#include <numeric>

#include "dapple/common/error.h"

namespace dapple {

// Note [Per-server speeds]: a job may span servers of different device generations (a
// cluster's server may carry its own `device`, docs/planner.md "Mixed clusters"). Every
// rank times the same loop at once; each server's devices are as fast, relative to the
// profile's device, as rank 0's loop alone over the mean of that server's ranks' times. One
// speed is written for the whole job unless the servers differ by more than the tolerance,
// so that the noise between identical machines does not make a mixed cluster (which plans
// slower, and whose "device kinds" line would mislead). On one machine the ranks share the
// cores instead (emulation.shared_compute), and every device gets speed 1: this function is not
// used.
std::vector<double> ServerSpeeds(double alone_s, const std::vector<double>& together_by_rank_s,
                                 const std::vector<int>& server_of_rank, double tolerance) {
  DAPPLE_CHECK(!together_by_rank_s.empty() && together_by_rank_s.size() == server_of_rank.size());
  const int servers = *std::max_element(server_of_rank.begin(), server_of_rank.end()) + 1;
  std::vector<double> sum(servers, 0.0);
  std::vector<int> ranks(servers, 0);
  for (size_t i = 0; i < server_of_rank.size(); ++i) {
    DAPPLE_CHECK(together_by_rank_s[i] > 0);
    sum[server_of_rank[i]] += together_by_rank_s[i];
    ++ranks[server_of_rank[i]];
  }
  std::vector<double> speed(servers);
  for (int s = 0; s < servers; ++s) {
    DAPPLE_CHECK(ranks[s] > 0);
    speed[s] = alone_s / (sum[s] / ranks[s]);
  }
  const auto [slow, fast] = std::minmax_element(speed.begin(), speed.end());
  if (*fast <= *slow * (1 + tolerance)) {
    const double all = std::accumulate(together_by_rank_s.begin(), together_by_rank_s.end(), 0.0) /
                       static_cast<double>(together_by_rank_s.size());
    std::fill(speed.begin(), speed.end(), alone_s / all);
  }
  return speed;
}

}  // namespace dapple
