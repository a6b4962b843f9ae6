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
  std::vector<int> replicas;
  for (int s = 0; s < groups; ++s) {
    replicas.push_back(plan.stages[s].replicas());
    shape.push_back(replicas.back() > 1);  // LowerComms adds AR where > 1
  }
  std::shared_ptr<const Schedule> lowered;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = lowered_.find(shape);
    if (it != lowered_.end()) lowered = it->second;
  }
  if (!lowered) {
    lowered = std::make_shared<const Schedule>(
        LowerComms(MakeSchedule(plan.schedule, groups, plan.num_micro_batches, plan.virtual_stages),
                   replicas));
    std::lock_guard<std::mutex> lock(mu_);
    lowered = lowered_.try_emplace(std::move(shape), lowered).first->second;
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
