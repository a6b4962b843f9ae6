// Planning time of the DAPPLE planner per shipped profile (data/profiles/dapple) and
// cluster preset, BERT-48 on 64 x 8 (512 devices) and 1024 x 8 (8192 devices) clusters, and
// the seeded random medium problems of tests/plan/medium_exhaustive_test.cc (20 seeds of each
// kind at 10, 11 and 12 layers, the planner alone). Wall times: the planner runs the DP of each
// micro-batch size and the refinement's simulations on every core. Global batches as in the
// planning report (scripts/planning_report.py).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "dapple/cost/analytic_cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/profile.h"
#include "dapple/plan/planner.h"
#include "plan/random_medium_problems.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;

fs::path ProfileDir() { return fs::path(DAPPLE_SOURCE_DIR) / "data" / "profiles" / "dapple"; }

// The report's global batches; profiles without "-pbs-N" in their name (vgg16.txt) get
// PBS 64, as in scripts/planning_report.py.
int GlobalBatch(const std::string& file) {
  if (file.rfind("vgg", 0) == 0 || file.rfind("resnet", 0) == 0) return 2048;
  if (file.rfind("gnmt", 0) == 0) return 1024;
  if (file.rfind("bert", 0) == 0) return 64;
  if (file.rfind("xlnet", 0) == 0 || file.rfind("amoeba", 0) == 0) return 128;
  return 256;
}

void Plan(benchmark::State& state, const std::string& file, const Cluster& cluster, int gbs) {
  fs::path path = ProfileDir() / file;
  std::optional<int> pbs;
  if (!PbsFromFileName(path)) pbs = 64;
  Profile profile = LoadProfile(path, pbs);
  AnalyticCostModel cost(profile, cluster);
  PlanResult r;
  for (auto _ : state) {
    r = RunPlanner(profile, cluster, cost, gbs, PlannerOptions{});
    benchmark::DoNotOptimize(r);
  }
  state.counters["layers"] = profile.num_layers();
  state.counters["devices"] = cluster.num_devices();
  state.counters["gbs"] = gbs;
  state.counters["speedup"] = r.plan ? r.plan->estimate->speedup : 0;
  state.counters["stages"] = r.plan ? r.plan->num_stages() : 0;
  state.counters["simulated"] = static_cast<double>(r.plans_simulated);
  // 1 when a refinement climb ran out of its budget of simulations.
  state.counters["out_of_budget"] = r.refine_out_of_budget ? 1 : 0;
}

// paper-a's servers and links, `servers` x 8 devices.
Cluster Big(int servers = 64) {
  Cluster c = ClusterPreset("paper-a");
  c.name = std::to_string(servers) + "x8";
  c.servers.assign(servers, ServerSpec{8, std::nullopt});
  return c;
}

// The planner on seeds 1-20 of a medium kind ("fake", "analytic", "mixed", or
// "mixed-fast-first": the mixed problems with the fast server listed first) of `layers` layers,
// as the medium comparison runs it (no interleaving); counters: the sum of the plans' times.
// With DAPPLE_MEDIUM_PLANS set, each problem's plan time on stderr (to compare two builds'
// plans problem by problem).
void PlanMedium(benchmark::State& state, const std::string& kind, int layers) {
  std::vector<std::unique_ptr<testing::RandomProblem>> problems;
  for (unsigned seed = 1; seed <= 20; ++seed)
    problems.push_back(kind == "fake" ? testing::MakeMediumProblem(seed, layers)
                                      : testing::MakeMediumAnalyticProblem(
                                            seed, kind != "analytic", layers,
                                            /*fast_listed_first=*/kind == "mixed-fast-first"));
  PlannerOptions o;
  o.interleave = false;
  double total_ms = 0, simulated = 0;
  for (auto _ : state) {
    total_ms = simulated = 0;
    for (const auto& p : problems) {
      PlanResult r = RunPlanner(p->profile, p->cluster, *p->cost, p->global_batch, o);
      const double ms = r.plan ? r.plan->estimate->iteration_ms : 0;
      total_ms += ms;
      if (std::getenv("DAPPLE_MEDIUM_PLANS"))
        std::fprintf(stderr, "%s: %.4f ms (%s)\n", p->description.c_str(), ms, r.origin.c_str());
      simulated += static_cast<double>(r.plans_simulated);
    }
  }
  state.counters["sum_ms"] = total_ms;
  state.counters["simulated"] = simulated;
}

int Register() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(ProfileDir()))
    if (e.path().extension() == ".txt") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  for (const std::string preset : {"paper-a", "paper-b", "paper-c"}) {
    for (const std::string& f : files) {
      benchmark::RegisterBenchmark(
          ("plan/" + preset + "/" + f).c_str(),
          [f, preset](benchmark::State& s) { Plan(s, f, ClusterPreset(preset), GlobalBatch(f)); })
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1);
    }
  }
  benchmark::RegisterBenchmark(
      "plan/64x8/bert-48-pbs-2.txt/gbs-1024",
      [](benchmark::State& s) { Plan(s, "bert-48-pbs-2.txt", Big(), 1024); })
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1);
  // 1024 servers x 8 devices (8192): one sample per device at GBS 8192.
  benchmark::RegisterBenchmark(
      "plan/1024x8/bert-48-pbs-2.txt/gbs-8192",
      [](benchmark::State& s) { Plan(s, "bert-48-pbs-2.txt", Big(1024), 8192); })
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1);
  for (int layers : {10, 11, 12})
    for (const std::string kind : {"fake", "analytic", "mixed", "mixed-fast-first"})
      benchmark::RegisterBenchmark(
          ("plan/medium/" + kind + "/" + std::to_string(layers)).c_str(),
          [kind, layers](benchmark::State& s) { PlanMedium(s, kind, layers); })
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1);
  return 0;
}

const int registered = Register();

}  // namespace
}  // namespace dapple

BENCHMARK_MAIN();
