// AnalyticCostModel: compute, interpolation, cut sizes, allreduce and memory, by hand.
#include "dapple/cost/analytic_cost_model.h"

#include <gtest/gtest.h>

#include "cost/cost_test_util.h"
#include "dapple/common/error.h"

namespace dapple {
namespace {

using testing::FourLayerChain;
using testing::TwoByFour;

TEST(AnalyticCostModel, ComputeScalesWithSamplesAndSpeed) {
  Profile p = FourLayerChain();
  Cluster c = TwoByFour();
  AnalyticCostModel cost(p, c);
  EXPECT_EQ(cost.num_layers(), 4);
  EXPECT_EQ(cost.num_devices(), 8);
  EXPECT_EQ(cost.profile_batch_size(), 4);
  EXPECT_DOUBLE_EQ(cost.ForwardMs(1, 2, 2, 0), (2 + 3) * 2.0 / 4);       // 2.5
  EXPECT_DOUBLE_EQ(cost.ForwardMs(1, 2, 2, 4), 2.5 / 2);                 // speed 2
  EXPECT_DOUBLE_EQ(cost.BackwardMs(0, 3, 8, 0), (2 + 4 + 6 + 8) * 2.0);  // 40
  EXPECT_DOUBLE_EQ(cost.ForwardMs(3, 3, 4, 1), 4);
  EXPECT_DOUBLE_EQ(cost.SingleDeviceMs(8), (10 + 20) * 8.0 / 4);  // 60
}

// Stage [0, 1] forward at batch 2, 4, 8: 1.5, 2.5, 5.5 ms.
Profile ByBatchProfile() {
  Profile p;
  p.batch_size = 4;
  p.batch_sizes = {2, 4, 8};
  LayerProfile a;
  a.id = "a";
  a.forward_ms = 1.5;
  a.forward_ms_by_batch = {1.0, 1.5, 3.5};
  a.backward_ms = 2;  // no per-batch backward: scaled linearly from PBS (1, 2, 4)
  LayerProfile b;
  b.id = "b";
  b.forward_ms = 1.0;
  b.forward_ms_by_batch = {0.5, 1.0, 2.0};
  b.backward_ms = 2.0;
  b.backward_ms_by_batch = {0.1, 2.0, 4.0};
  p.layers = {a, b};
  return p;
}

TEST(AnalyticCostModel, InterpolatesOverBatchSizes) {
  Profile p = ByBatchProfile();
  Cluster c = TwoByFour();
  AnalyticCostModel cost(p, c);
  EXPECT_DOUBLE_EQ(cost.ForwardMs(0, 1, 2, 0), 1.5);    // measured
  EXPECT_DOUBLE_EQ(cost.ForwardMs(0, 1, 4, 0), 2.5);    // measured
  EXPECT_DOUBLE_EQ(cost.ForwardMs(0, 1, 3, 0), 2.0);    // between 2 and 4
  EXPECT_DOUBLE_EQ(cost.ForwardMs(0, 1, 6, 0), 4.0);    // between 4 and 8
  EXPECT_DOUBLE_EQ(cost.ForwardMs(0, 1, 16, 0), 11.5);  // from 4 and 8: 2.5 + 3 x 3
  EXPECT_DOUBLE_EQ(cost.ForwardMs(0, 1, 1, 0), 1.0);    // from 2 and 4: 1.5 - 0.5
  EXPECT_DOUBLE_EQ(cost.ForwardMs(0, 1, 3, 4), 1.0);    // speed 2
  EXPECT_DOUBLE_EQ(cost.BackwardMs(0, 0, 3, 0), 1.5);   // linear from PBS
  EXPECT_DOUBLE_EQ(cost.BackwardMs(1, 1, 1, 0), 0.0);   // 0.1 - 0.5 x 1.9 < 0: clamped
  EXPECT_DOUBLE_EQ(cost.BackwardMs(1, 1, 3, 0), 1.05);
  EXPECT_DOUBLE_EQ(cost.BackwardMs(0, 1, 0, 0), 0.0);  // no samples, no work
}

TEST(AnalyticCostModel, SingleMeasuredBatchSizeScalesLinearly) {
  Profile p = ByBatchProfile();
  p.batch_sizes = {8};
  for (LayerProfile& l : p.layers) {
    if (!l.forward_ms_by_batch.empty()) l.forward_ms_by_batch = {l.forward_ms_by_batch.back()};
    if (!l.backward_ms_by_batch.empty()) l.backward_ms_by_batch = {l.backward_ms_by_batch.back()};
  }
  Cluster c = TwoByFour();
  AnalyticCostModel cost(p, c);
  EXPECT_DOUBLE_EQ(cost.ForwardMs(0, 1, 4, 0), 5.5 / 2);
}

TEST(AnalyticCostModel, CutBytesOnBranchingGraph) {
  Profile p = FourLayerChain();
  Cluster c = TwoByFour();
  {
    AnalyticCostModel chain(p, c);
    EXPECT_DOUBLE_EQ(chain.CutBytes(1, 4), 200);
    EXPECT_DOUBLE_EQ(chain.CutBytes(1, 2), 100);
    EXPECT_DOUBLE_EQ(chain.CutBytes(3, 4), 0);
  }
  // l0 -> l1, l0 -> l2, l1 -> l2, l2 -> l3, l0 -> l3 (a skip over two layers).
  p.edges = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {2, 3}};
  AnalyticCostModel graph(p, c);
  EXPECT_DOUBLE_EQ(graph.CutBytes(0, 4), 100);
  EXPECT_DOUBLE_EQ(graph.CutBytes(1, 4), 100 + 200);
  EXPECT_DOUBLE_EQ(graph.CutBytes(2, 4), 100 + 400);
  EXPECT_DOUBLE_EQ(graph.CutBytes(1, 2), 150);
  EXPECT_DOUBLE_EQ(graph.StageInputBytes(2, 4), 300);
}

TEST(AnalyticCostModel, RingAllReduce) {
  Profile p = FourLayerChain();  // 100 B of parameters in all
  Cluster c = TwoByFour();
  AnalyticCostModel cost(p, c);
  EXPECT_DOUBLE_EQ(cost.AllReduceMs(0, 3, {2}), 0);
  // 4 devices of one server: 2 x 3/4 x 100 B / 1e6 B/s + 6 x 1 ms = 0.15 ms + 6 ms.
  EXPECT_NEAR(cost.AllReduceMs(0, 3, {0, 1, 2, 3}), 6.15, 1e-12);
  // Across servers: 2 x 1/2 x 100 B / 1e5 B/s + 2 x 2 ms = 1 ms + 4 ms.
  EXPECT_NEAR(cost.AllReduceMs(0, 3, {0, 4}), 5.0, 1e-12);
  // Layers 1..2 only (50 B), 2 devices of server 1: 50 / 1e6 s + 2 ms.
  EXPECT_NEAR(cost.AllReduceMs(1, 2, {5, 6}), 2.05, 1e-12);
}

TEST(AnalyticCostModel, Memory) {
  Profile p = FourLayerChain();
  Cluster c = TwoByFour();
  AnalyticCostModel cost(p, c);
  EXPECT_DOUBLE_EQ(cost.StaticMemoryBytes(0, 1), 30 * 4.0);
  EXPECT_DOUBLE_EQ(cost.ActivationBytes(1, 2, 2), (200 + 50) * 2.0 / 4);  // saved_bytes wins
  EXPECT_DOUBLE_EQ(cost.ActivationBytes(0, 3, 4), 100 + 200 + 50 + 800);
  EXPECT_DOUBLE_EQ(cost.StageInputBytes(0, 4), 0);    // the input not recorded
  EXPECT_DOUBLE_EQ(cost.StageInputBytes(2, 2), 100);  // l1's 200 B at half the batch
  p.input_bytes = 64;  // the model input, recorded by `dapple profile`
  EXPECT_DOUBLE_EQ(AnalyticCostModel(p, c).StageInputBytes(0, 2), 32);
  EXPECT_DOUBLE_EQ(cost.DeviceMemoryBytes(0), 16e9);
  EXPECT_DOUBLE_EQ(cost.DeviceMemoryBytes(7), 8e9);
  AnalyticCostModel custom(p, c, CostOptions{2.0, 1e9});
  EXPECT_DOUBLE_EQ(custom.StaticMemoryBytes(0, 1), 60);
  EXPECT_DOUBLE_EQ(custom.DeviceMemoryBytes(7), 1e9);
}

// Note [Mixed precision]: a bf16 stage also holds bf16 copies of its float32 weights (half a
// byte per parameter byte), sharded or not; its activations are the profile's (bf16) bytes.
TEST(AnalyticCostModel, Bf16ProfilesHoldWeightCopies) {
  Profile p = FourLayerChain();
  p.precision = Precision::kBf16;
  Cluster c = TwoByFour();
  AnalyticCostModel cost(p, c);
  EXPECT_DOUBLE_EQ(cost.StaticMemoryBytes(0, 1), 30 * 4.5);
  // Sharded over 4: weights, gradients and the reduce-scatter's receive buffers 3, moments
  // 2 / 4, copies 0.5.
  EXPECT_DOUBLE_EQ(cost.ShardedStaticMemoryBytes(0, 1, 4), 30 * 4.0);
  EXPECT_DOUBLE_EQ(cost.ActivationBytes(0, 3, 4), 100 + 200 + 50 + 800);
  p.precision = Precision::kFloat32;
  EXPECT_DOUBLE_EQ(AnalyticCostModel(p, c).ShardedStaticMemoryBytes(0, 1, 4), 30 * 3.5);
  // Over 2 it saves nothing with a state factor of 4: 3 + 2 / 2.
  EXPECT_DOUBLE_EQ(AnalyticCostModel(p, c).ShardedStaticMemoryBytes(0, 1, 2), 30 * 4.0);
}

// Note [Data in the memory figure]: the first stage's devices hold the data's inputs, the
// last stage's its targets, beside their parameters and state; sharded or not.
TEST(AnalyticCostModel, TheDataIsWithTheFirstAndTheLastStage) {
  Profile p = FourLayerChain();  // layers 0..1: 30 B of parameters, 2..3: 70 B
  p.data_input_bytes = 1000;
  p.data_target_bytes = 10;
  const Cluster c = TwoByFour();
  AnalyticCostModel cost(p, c);
  EXPECT_DOUBLE_EQ(cost.StaticMemoryBytes(0, 1), 30 * 4.0 + 1000);
  EXPECT_DOUBLE_EQ(cost.StaticMemoryBytes(2, 3), 70 * 4.0 + 10);
  EXPECT_DOUBLE_EQ(cost.StaticMemoryBytes(1, 2), 50 * 4.0);  // neither the first nor the last
  EXPECT_DOUBLE_EQ(cost.StaticMemoryBytes(0, 3), 100 * 4.0 + 1010);
  EXPECT_DOUBLE_EQ(cost.ShardedStaticMemoryBytes(0, 1, 4), 30 * 3.5 + 1000);
}

TEST(AnalyticCostModel, TheProcessesOwnMemoryIsNotTheStages) {
  // Note [Process memory]: a stage may use the device's memory less the process's own.
  Profile p = FourLayerChain();
  Cluster c = TwoByFour();
  c.device.process_memory_bytes = 3e9;
  c.servers[1].device->process_memory_bytes = 1e9;
  AnalyticCostModel cost(p, c, CostOptions{});
  EXPECT_DOUBLE_EQ(cost.ProcessMemoryBytes(0), 3e9);
  EXPECT_DOUBLE_EQ(cost.DeviceMemoryBytes(0), 16e9 - 3e9);
  EXPECT_DOUBLE_EQ(cost.ProcessMemoryBytes(7), 1e9);
  EXPECT_DOUBLE_EQ(cost.DeviceMemoryBytes(7), 8e9 - 1e9);
  // --memory-gb replaces the device's memory; the process still takes its share of it.
  AnalyticCostModel custom(p, c, CostOptions{2.0, 2e9});
  EXPECT_DOUBLE_EQ(custom.DeviceMemoryBytes(0), 0);
  EXPECT_DOUBLE_EQ(custom.DeviceMemoryBytes(7), 1e9);
}

TEST(AnalyticCostModel, ShippedProfileOnPaperCluster) {
  // A sanity check on real numbers: BERT-48 on paper-a, two 26-layer halves.
  Profile p = LoadProfile(std::string(DAPPLE_DATA_DIR) + "/profiles/dapple/bert-48-pbs-2.txt");
  Cluster c = ClusterPreset("paper-a");
  AnalyticCostModel cost(p, c);
  const int n = p.num_layers();
  double whole = cost.ForwardMs(0, n - 1, 2, 0);
  double sum = 0;
  for (const LayerProfile& l : p.layers) sum += l.forward_ms;
  EXPECT_NEAR(whole, sum, 1e-9);
  EXPECT_NEAR(cost.ForwardMs(0, n / 2, 2, 0) + cost.ForwardMs(n / 2 + 1, n - 1, 2, 0), whole, 1e-9);
  EXPECT_GT(cost.CutBytes(n / 2, 2), 0);
  EXPECT_GT(cost.AllReduceMs(0, n - 1, {0, 8}), cost.AllReduceMs(0, n - 1, {0, 1}));
}

}  // namespace
}  // namespace dapple

namespace dapple {
namespace {

// Without a measured split, W is weight_grad_share of backward_ms on layers with
// parameters and 0 on layers without; I is the rest. A measured split is used as is.
TEST(AnalyticCostModel, BackwardSplitDefaultShareAndMeasured) {
  Profile p = testing::FourLayerChain();  // bwd 2, 4, 6, 8 ms at PBS 4
  p.layers[1].parameter_bytes = 0;
  p.layers[3].backward_input_ms = 5;
  p.layers[3].backward_weight_ms = 4;
  Cluster c = testing::TwoByFour();
  AnalyticCostModel half(p, c);
  EXPECT_DOUBLE_EQ(half.BackwardWeightMs(0, 0, 4, 0), 1.0);
  EXPECT_DOUBLE_EQ(half.BackwardInputMs(0, 0, 4, 0), 1.0);
  EXPECT_DOUBLE_EQ(half.BackwardWeightMs(1, 1, 4, 0), 0.0);  // no parameters
  EXPECT_DOUBLE_EQ(half.BackwardInputMs(1, 1, 4, 0), 4.0);
  EXPECT_DOUBLE_EQ(half.BackwardInputMs(3, 3, 2, 0), 2.5);   // measured, linear in samples
  EXPECT_DOUBLE_EQ(half.BackwardWeightMs(3, 3, 4, 4), 2.0);  // device speed 2
  EXPECT_DOUBLE_EQ(half.BackwardWeightMs(0, 3, 4, 0), 1 + 0 + 3 + 4);
  CostOptions o;
  o.weight_grad_share = 0.25;
  AnalyticCostModel quarter(p, c, o);
  EXPECT_DOUBLE_EQ(quarter.BackwardWeightMs(2, 2, 4, 0), 1.5);
  EXPECT_DOUBLE_EQ(quarter.BackwardInputMs(2, 2, 4, 0), 4.5);
  o.weight_grad_share = 1.5;
  EXPECT_THROW(AnalyticCostModel(p, c, o), InputError);
}

}  // namespace
}  // namespace dapple
