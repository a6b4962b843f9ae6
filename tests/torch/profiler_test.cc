// The layer profiler: a profile of a tiny model is valid, its sizes are exact, several
// batch sizes align, the saved-bytes measurement sees what autograd keeps; the CPU
// environment helpers.
#include "dapple/profiler/profiler.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>

#include <filesystem>

#include "dapple/common/error.h"
#include "dapple/cpu/blas_env.h"
#include "dapple/format/profile.h"
#include "dapple/models/mixed_precision.h"
#include "dapple/models/model.h"
#include "dapple/profiler/counting_allocator.h"

namespace dapple {
namespace {

ProfilerOptions Quick(int batch) {
  ProfilerOptions o;
  o.batch_size = batch;
  o.warmup = 1;
  o.repeat = 3;
  o.progress = false;
  return o;
}

TEST(Profiler, TinyMlpProfileIsValidAndExact) {
  Model m = BuildModel("mlp", {{"input", "20"}, {"hidden", "32"}, {"layers", "2"}}, 1);
  Profile p = ProfileModel(m, Quick(8));
  ValidateProfile(p, "test");
  ASSERT_EQ(p.num_layers(), 3);
  EXPECT_EQ(p.model, "mlp");
  EXPECT_EQ(p.batch_size, 8);
  EXPECT_EQ(p.layers[0].id, "fc0");
  EXPECT_EQ(p.layers[2].id, "head");
  EXPECT_DOUBLE_EQ(p.layers[0].activation_bytes, 8 * 32 * 4);
  EXPECT_DOUBLE_EQ(p.layers[2].activation_bytes, 8 * 10 * 4);
  EXPECT_DOUBLE_EQ(p.layers[0].parameter_bytes, (20 * 32 + 32) * 4);
  EXPECT_DOUBLE_EQ(p.layers[1].parameter_bytes, (32 * 32 + 32) * 4);
  double params = 0;
  for (const auto& l : p.layers) {
    EXPECT_GT(l.forward_ms, 0);
    EXPECT_GT(l.backward_ms, 0);
    params += l.parameter_bytes;
  }
  EXPECT_DOUBLE_EQ(params, m.ParameterCount() * 4.0);
  // Linear+ReLU keeps exactly its output for backward (the input is the previous layer's).
  EXPECT_DOUBLE_EQ(p.layers[0].saved_bytes, p.layers[0].activation_bytes);
  EXPECT_EQ(p.metadata.count("threads"), 1u);
  EXPECT_EQ(p.metadata.at("blas"), "mkl");  // the wheel's BLAS
  EXPECT_EQ(p.metadata.at("libtorch").rfind("2.", 0), 0u);
}

// Note [Slowest device core]: timed on each device's core in turn; the calling thread gets
// its cores back, also when a core set cannot be used.
// Note [Mixed precision]: a bf16 model's profile records its precision, and its activation
// bytes are the wire bytes (the hidden layers' float32 outputs at 2 bytes an element, as
// autocast's linear maps give them); the parameters stay float32.
TEST(Profiler, Bf16ProfileRecordsItsPrecisionAndHalvedActivations) {
  Model f32 = BuildModel("mlp", {{"input", "20"}, {"hidden", "32"}, {"layers", "2"}}, 1);
  Model bf16 = BuildModel("mlp", {{"input", "20"}, {"hidden", "32"}, {"layers", "2"}}, 1);
  UseMixedPrecision(bf16, Precision::kBf16);
  const Profile a = ProfileModel(f32, Quick(8)), b = ProfileModel(bf16, Quick(8));
  EXPECT_EQ(a.precision, Precision::kFloat32);
  EXPECT_EQ(b.precision, Precision::kBf16);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    EXPECT_EQ(2 * b.layers[i].activation_bytes, a.layers[i].activation_bytes) << i;
    EXPECT_EQ(b.layers[i].parameter_bytes, a.layers[i].parameter_bytes) << i;
  }
  EXPECT_EQ(a.layers[0].activation_bytes, 8 * 32 * 4);
  for (const torch::Tensor& w : bf16.Parameters(0, bf16.num_layers() - 1))
    EXPECT_EQ(w.scalar_type(), torch::kFloat32);
}

TEST(Profiler, TimesOnEveryDeviceCoreAndGivesTheThreadItsCoresBack) {
  Model m = BuildModel("mlp", {{"input", "20"}, {"hidden", "32"}, {"layers", "2"}}, 1);
  const CoreSet allowed = AllowedCores();
  ASSERT_FALSE(allowed.empty());
  ProfilerOptions o = Quick(8);
  o.core_sets = {{allowed.front()}, {allowed.back()}};
  Profile p = ProfileModel(m, o);
  ValidateProfile(p, "test");
  for (const auto& l : p.layers) EXPECT_GT(l.forward_ms, 0);
  EXPECT_EQ(p.metadata.at("cores").rfind(
                FormatCores({allowed.front()}) + " | " + FormatCores({allowed.back()}), 0),
            0u);
  EXPECT_EQ(AllowedCores(), allowed);
  Profile one = ProfileModel(m, Quick(8));
  EXPECT_EQ(one.metadata.count("cores"), 0u);  // one set or none: no rounds

  o.core_sets = {{allowed.front()}, {100000}};  // beyond any CPU set
  try {
    ProfileModel(m, o);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run on cores 100000"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(AllowedCores(), allowed);
}

// Note [Cold caches]: the same layers and sizes, timed after a 64 MiB write; the metadata says
// so. (Which is faster is a benchmark's question: scripts/predicted_vs_measured.sh.)
TEST(Profiler, ColdCachesChangeOnlyTheTiming) {
  Model m = BuildModel("mlp", {{"input", "20"}, {"hidden", "32"}, {"layers", "2"}}, 1);
  Profile warm = ProfileModel(m, Quick(8));
  ProfilerOptions o = Quick(8);
  o.cold_caches = true;
  Profile cold = ProfileModel(m, o);
  ValidateProfile(cold, "test");
  EXPECT_EQ(warm.metadata.at("caches").rfind("warm", 0), 0u);
  EXPECT_EQ(cold.metadata.at("caches").rfind("cold", 0), 0u);
  ASSERT_EQ(cold.num_layers(), warm.num_layers());
  for (int i = 0; i < cold.num_layers(); ++i) {
    EXPECT_GT(cold.layers[i].forward_ms, 0);
    EXPECT_GT(cold.layers[i].backward_ms, 0);
    EXPECT_EQ(cold.layers[i].activation_bytes, warm.layers[i].activation_bytes);
    EXPECT_EQ(cold.layers[i].saved_bytes, warm.layers[i].saved_bytes);
  }
}

// update_ms: one optimizer step per layer, on copies of the parameters.
TEST(Profiler, UpdateMsForLayersWithParameters) {
  Model m = BuildModel("mlp", {{"input", "20"}, {"hidden", "32"}, {"layers", "2"}}, 1);
  // A parameter-free layer in between (no zoo model has one).
  m.layers.insert(m.layers.begin() + 1, MakeLayer("relu", torch::nn::AnyModule(torch::nn::ReLU())));
  std::vector<torch::Tensor> before;
  for (const torch::Tensor& t : m.Parameters(0, m.num_layers() - 1)) before.push_back(t.clone());
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
    ProfilerOptions o = Quick(8);
    o.optimizer.kind = kind;
    Profile p = ProfileModel(m, o);
    ASSERT_EQ(p.num_layers(), 4);
    ASSERT_EQ(p.layers[1].id, "relu");
    EXPECT_EQ(p.layers[1].parameter_bytes, 0);
    EXPECT_EQ(p.layers[1].update_ms, 0);
    for (int i : {0, 2, 3}) EXPECT_GT(p.layers[i].update_ms, 0) << p.layers[i].id;
    EXPECT_EQ(p.metadata.at("optimizer"), ToString(kind));
    EXPECT_NE(p.metadata.at("optimizer_options").find("lr 0.01"), std::string::npos);
  }
  // The model's own weights are as they were built.
  std::vector<torch::Tensor> after = m.Parameters(0, m.num_layers() - 1);
  ASSERT_EQ(after.size(), before.size());
  for (size_t k = 0; k < after.size(); ++k) EXPECT_TRUE(torch::equal(after[k], before[k])) << k;
  for (const torch::Tensor& t : after) EXPECT_FALSE(t.grad().defined());
}

TEST(Profiler, AttentionSavesMoreThanItsOutput) {
  Model m =
      BuildModel("gpt", {{"hidden", "16"}, {"heads", "2"}, {"layers", "1"}, {"seq", "32"}}, 1);
  Profile p = ProfileModel(m, Quick(4));
  ASSERT_EQ(p.layers[1].id, "block0");
  // Probabilities [4, 2, 32, 32] alone are twice the output [4, 32, 16].
  EXPECT_GT(p.layers[1].saved_bytes, 3 * p.layers[1].activation_bytes);
}

TEST(Profiler, SeveralBatchSizes) {
  Model m = BuildModel("mlp", {{"input", "10"}, {"hidden", "8"}, {"layers", "1"}}, 1);
  ProfilerOptions o = Quick(4);
  o.batch_sizes = {8, 2};
  Profile p = ProfileModel(m, o);
  EXPECT_EQ(p.batch_sizes, (std::vector<int>{2, 4, 8}));
  for (const auto& l : p.layers) {
    ASSERT_EQ(l.forward_ms_by_batch.size(), 3u);
    ASSERT_EQ(l.backward_ms_by_batch.size(), 3u);
    EXPECT_EQ(l.forward_ms, l.forward_ms_by_batch[1]);
    EXPECT_EQ(l.backward_ms, l.backward_ms_by_batch[1]);
  }
  ValidateProfile(p, "test");
}

TEST(Profiler, JsonRoundTrip) {
  Model m =
      BuildModel("bert", {{"hidden", "16"}, {"heads", "2"}, {"layers", "1"}, {"seq", "8"}}, 1);
  Profile p = ProfileModel(m, Quick(2));
  auto path = std::filesystem::temp_directory_path() /
              ("dapple_profiler_test_" + std::to_string(::getpid()) + ".json");
  WriteProfileJson(p, path);
  Profile q = ReadProfileJson(path);
  std::filesystem::remove(path);
  ASSERT_EQ(q.num_layers(), p.num_layers());
  for (int i = 0; i < p.num_layers(); ++i) {
    EXPECT_EQ(q.layers[i].id, p.layers[i].id);
    EXPECT_DOUBLE_EQ(q.layers[i].forward_ms, p.layers[i].forward_ms);
    EXPECT_DOUBLE_EQ(q.layers[i].saved_bytes, p.layers[i].saved_bytes);
    EXPECT_DOUBLE_EQ(q.layers[i].update_ms, p.layers[i].update_ms);
    EXPECT_GT(q.layers[i].update_ms, 0);
  }
}

TEST(Profiler, BadOptions) {
  Model m = BuildModel("mlp", {}, 1);
  EXPECT_THROW(ProfileModel(m, Quick(0)), InputError);
  ProfilerOptions o = Quick(2);
  o.repeat = 0;
  EXPECT_THROW(ProfileModel(m, o), InputError);
  o = Quick(2);
  o.batch_sizes = {0};
  EXPECT_THROW(ProfileModel(m, o), InputError);
}

TEST(CountingAllocator, SeesAllocationsAndFrees) {
  ScopedAllocationCounter counter;
  int64_t before = counter.live_bytes();
  {
    torch::Tensor t = torch::empty({1000}, torch::kFloat32);
    EXPECT_EQ(counter.live_bytes() - before, 4000);
  }
  EXPECT_EQ(counter.live_bytes(), before);
}

TEST(BlasEnv, CpuModelName) { EXPECT_NE(CpuModelName(), ""); }

}  // namespace
}  // namespace dapple
