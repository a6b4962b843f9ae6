// Shared by the fuzz targets: runs the analytic cost model over a parsed profile and
// aborts on a result that is NaN or negative (a valid profile must give sane costs).
#pragma once

#include <cmath>
#include <cstdlib>

#include "dapple/cost/analytic_cost_model.h"

namespace dapple::fuzz {

inline void Sane(double v) {
  if (std::isnan(v) || v < 0) abort();
}

inline void ProbeCostModel(const Profile& p) {
  static const Cluster cluster = ClusterPreset("paper-a");
  AnalyticCostModel cost(p, cluster);
  const int n = p.num_layers();
  for (double samples : {1.0, 3.0, 1000.0}) {
    Sane(cost.ForwardMs(0, n - 1, samples, 0));
    Sane(cost.BackwardMs(n / 2, n - 1, samples, 9));
    Sane(cost.ActivationBytes(0, n - 1, samples));
    Sane(cost.StageInputBytes(n - 1, samples));
  }
  for (int b = 0; b < n; b += 1 + n / 16) {
    Sane(cost.CutBytes(b, 4));
    Sane(cost.Transfer(b, 7, {0, 1, 2}, {8, 3}).ms);
  }
  Sane(cost.AllReduceMs(0, n - 1, {0, 9, 3}));
  Sane(cost.StaticMemoryBytes(0, n - 1));
  Sane(cost.SingleDeviceMs(64));
}

}  // namespace dapple::fuzz
