// The DAPPLE DP and PipeDream's DP ask the cost model for many layer ranges at once
// (CostModel::AllReduceMsFrom, TransferMsAt) and PipeDream's caches a stage by the kind of
// its first device (CostModel::DeviceKind). Against the same model behind a wrapper that
// answers those one question at a time (the interface's defaults) and calls every device a
// kind of its own, they must decide alike: the same plans, the same latencies to the bit.
#include <gtest/gtest.h>

#include <string>

#include "dapple/cost/analytic_cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/profile.h"
#include "dapple/plan/baselines/baselines.h"
#include "dapple/plan/dp/dapple_dp.h"
#include "random_problems.h"
#include "stages_text.h"

namespace dapple {
namespace {

// `inner`'s answers, asked one by one; every device its own kind.
class OneByOne : public CostModel {
 public:
  explicit OneByOne(const CostModel& inner) : c_(inner) {}
  int num_layers() const override { return c_.num_layers(); }
  int num_devices() const override { return c_.num_devices(); }
  int profile_batch_size() const override { return c_.profile_batch_size(); }
  double ForwardMs(int f, int l, double s, int d) const override {
    return c_.ForwardMs(f, l, s, d);
  }
  double BackwardMs(int f, int l, double s, int d) const override {
    return c_.BackwardMs(f, l, s, d);
  }
  double BackwardInputMs(int f, int l, double s, int d) const override {
    return c_.BackwardInputMs(f, l, s, d);
  }
  double BackwardWeightMs(int f, int l, double s, int d) const override {
    return c_.BackwardWeightMs(f, l, s, d);
  }
  double CutBytes(int l, double s) const override { return c_.CutBytes(l, s); }
  TransferCost Transfer(int l, double mb, const std::vector<int>& a,
                        const std::vector<int>& b) const override {
    return c_.Transfer(l, mb, a, b);
  }
  double TransferMs(int l, double mb, const std::vector<int>& a,
                    const std::vector<int>& b) const override {
    return c_.TransferMs(l, mb, a, b);
  }
  double UpdateMs(int f, int l, int d) const override { return c_.UpdateMs(f, l, d); }
  double AllReduceMs(int f, int l, const std::vector<int>& d) const override {
    return c_.AllReduceMs(f, l, d);
  }
  double ParameterBytes(int f, int l) const override { return c_.ParameterBytes(f, l); }
  double AllReduceBucketBytes() const override { return c_.AllReduceBucketBytes(); }
  double StaticMemoryBytes(int f, int l) const override { return c_.StaticMemoryBytes(f, l); }
  double ShardedStaticMemoryBytes(int f, int l, int r) const override {
    return c_.ShardedStaticMemoryBytes(f, l, r);
  }
  double ActivationBytes(int f, int l, double s) const override {
    return c_.ActivationBytes(f, l, s);
  }
  double StageInputBytes(int f, double s) const override { return c_.StageInputBytes(f, s); }
  double DeviceMemoryBytes(int d) const override { return c_.DeviceMemoryBytes(d); }
  double ProcessMemoryBytes(int d) const override { return c_.ProcessMemoryBytes(d); }
  double SingleDeviceMs(int gbs) const override { return c_.SingleDeviceMs(gbs); }

 private:
  const CostModel& c_;
};

using testing::StagesText;

void ExpectAlike(const CostModel& cost, const Cluster& cluster, int gbs, const std::string& what) {
  const OneByOne slow(cost);
  for (int m = 1; m <= gbs; m *= 2) {
    if (gbs % m) continue;
    for (bool memory : {true, false}) {
      DpOptions o;
      o.micro_batch_size = m;
      o.num_micro_batches = gbs / m;
      o.enforce_memory = memory;
      const std::vector<DpCandidate> a = DappleDp(cost, cluster, o);
      const std::vector<DpCandidate> b = DappleDp(slow, cluster, o);
      ASSERT_EQ(a.size(), b.size()) << what << ", m " << m;
      for (size_t k = 0; k < a.size(); ++k) {
        ASSERT_EQ(a[k].latency_ms, b[k].latency_ms) << what << ", m " << m << ", #" << k;
        ASSERT_EQ(StagesText(a[k].plan), StagesText(b[k].plan)) << what << ", m " << m;
      }
      const auto pa = PipeDreamPlan(cost, cluster, {m, gbs / m}, memory);
      const auto pb = PipeDreamPlan(slow, cluster, {m, gbs / m}, memory);
      ASSERT_EQ(pa.has_value(), pb.has_value()) << what << ", m " << m;
      if (pa) {
        ASSERT_EQ(StagesText(*pa), StagesText(*pb)) << what << ", m " << m;
      }
    }
  }
}

TEST(BatchQueriesPlanning, RandomAnalyticProblemsPlanAlike) {
  for (unsigned seed = 0; seed < 150; ++seed) {
    auto p = testing::MakeRandomAnalyticProblem(seed);
    ExpectAlike(*p->cost, p->cluster, p->global_batch, p->description);
  }
}

// GNMT's bytes per sample are fractional: the transfers take the walk and the links.
TEST(BatchQueriesPlanning, GnmtOnPaperAPlansAlike) {
  const Profile profile =
      LoadProfile(std::string(DAPPLE_SOURCE_DIR) + "/data/profiles/dapple/gnmt-16-pbs-64.txt");
  const Cluster cluster = ClusterPreset("paper-a");
  const AnalyticCostModel cost(profile, cluster);
  ExpectAlike(cost, cluster, 64, "gnmt-16 on paper-a");
}

}  // namespace
}  // namespace dapple
