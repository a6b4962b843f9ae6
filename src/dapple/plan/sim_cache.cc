// The simulator memo: see sim_cache.h.
#include "dapple/plan/sim_cache.h"

#include <cstring>

namespace dapple {

namespace {

void Put(std::string& key, int v) {
  char bytes[sizeof v];
  std::memcpy(bytes, &v, sizeof v);
  key.append(bytes, sizeof v);
}

}  // namespace

std::string SimKey(const Plan& plan) {
  std::string key;
  key.reserve(32 + 16 * plan.stages.size());
  Put(key, plan.micro_batch_size);
  Put(key, plan.num_micro_batches);
  Put(key, plan.global_batch_size);
  Put(key, static_cast<int>(plan.schedule));
  Put(key, plan.virtual_stages);
  Put(key, (plan.recompute ? 1 : 0) | (plan.allreduce_overlap ? 2 : 0));
  for (const StagePlan& st : plan.stages) {
    Put(key, st.first_layer);
    Put(key, st.last_layer);
    Put(key, st.recompute ? -1 - st.replicas() : st.replicas());
    for (int d : st.devices) Put(key, d);
  }
  return key;
}

SimResult SimCache::Simulate(const Plan& plan, const CostModel& cost) {
  std::string key = SimKey(plan);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = results_.find(key);
    if (it != results_.end()) {
      ++hits_;
      return it->second;
    }
    ++misses_;
  }
  // The lowered schedule, as SimulatePlan makes it.
  const int groups = plan.num_device_groups();
  std::vector<int> shape = {static_cast<int>(plan.schedule), groups, plan.num_micro_batches,
                            plan.virtual_stages};
  const size_t common = shape.size();
  for (int s = 0; s < groups; ++s) shape.push_back(plan.stages[s].replicas() > 1);
  std::shared_ptr<const Schedule> lowered;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = lowered_.find(shape);
    if (it != lowered_.end()) lowered = it->second;
  }
  if (!lowered) {
    // A stage's lowered list depends on the schedule, S, M, v and whether the stage has
    // replicas (LowerComms adds AR then): copied from the lists of no stage replicated and
    // of every stage replicated, lowered once per (schedule, S, M, v).
    std::vector<int> key(shape.begin(), shape.begin() + common);
    std::shared_ptr<const Variants> both;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = variants_.find(key);
      if (it != variants_.end()) both = it->second;
    }
    if (!both) {
      Schedule compute =
          MakeSchedule(plan.schedule, groups, plan.num_micro_batches, plan.virtual_stages);
      auto made = std::make_shared<Variants>();
      made->single = LowerComms(compute, std::vector<int>(groups, 1));
      made->replicated = LowerComms(compute, std::vector<int>(groups, 2));
      std::lock_guard<std::mutex> lock(mu_);
      both = variants_.try_emplace(key, std::move(made)).first->second;
    }
    auto made = std::make_shared<Schedule>(both->single);
    for (int s = 0; s < groups; ++s)
      if (shape[common + s]) made->programs[s] = both->replicated.programs[s];
    std::lock_guard<std::mutex> lock(mu_);
    lowered = lowered_.try_emplace(std::move(shape), std::move(made)).first->second;
  }
  SimResult r = dapple::Simulate(plan, *lowered, cost, SimOptions{.record_timeline = false});
  std::lock_guard<std::mutex> lock(mu_);
  return results_.try_emplace(std::move(key), std::move(r)).first->second;
}

long long SimCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

long long SimCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace dapple
