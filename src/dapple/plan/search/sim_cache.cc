// The simulator memo: see sim_cache.h.
#include "dapple/plan/search/sim_cache.h"

#include <cstring>

#include "dapple/plan/search/slower_than.h"
#include "dapple/sim/event_engine.h"

namespace dapple {

namespace {

void Put(std::string& key, int v) {
  char bytes[sizeof v];
  std::memcpy(bytes, &v, sizeof v);
  key.append(bytes, sizeof v);
}

// Interleaved 1F1B with one chunk lowers to dapple-b's lists (Note [Interleaved 1F1B]), so
// both simulate alike: `dapple plan`'s interleaved row climbs through the plans the
// dapple-b search simulated already.
ScheduleKind SimulatedKind(const Plan& plan) {
  return plan.schedule == ScheduleKind::kInterleaved && plan.virtual_stages == 1
             ? ScheduleKind::kDappleB
             : plan.schedule;
}

}  // namespace

std::string SimKey(const Plan& plan) {
  std::string key;
  key.reserve(32 + 16 * plan.stages.size());
  Put(key, plan.micro_batch_size);
  Put(key, plan.num_micro_batches);
  Put(key, plan.global_batch_size);
  Put(key, static_cast<int>(SimulatedKind(plan)));
  Put(key, plan.virtual_stages);
  Put(key, (plan.recompute ? 1 : 0) | (plan.allreduce_overlap ? 2 : 0));
  for (const StagePlan& st : plan.stages) {
    Put(key, st.first_layer);
    Put(key, st.last_layer);
    Put(key, st.recompute ? -1 - st.replicas() : st.replicas());
    Put(key, st.shard_optimizer ? 1 : 0);
    for (int d : st.devices) Put(key, d);
    Put(key, static_cast<int>(st.recompute_layers.size()));
    for (int l : st.recompute_layers) Put(key, l);
  }
  return key;
}

SimResult SimCache::Simulate(const Plan& plan, const CostModel& cost, double stop_above_ms,
                             bool uncontended_first) {
  std::string key = SimKey(plan);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = results_.find(key);
    // A stopped run proved its bound; it answers a call that asks less.
    if (it != results_.end() &&
        (!it->second.stopped || internal::ProvesLonger(it->second.iteration_ms, stop_above_ms))) {
      ++hits_;
      return it->second;
    }
    ++misses_;
  }
  // The lowered schedule, as SimulatePlan makes it: a stage's list depends only on the
  // schedule, S, M, v and whether the stage has replicas (LowerComms adds AR before STEP
  // then), so the memo keeps, per (schedule, S, M, v), the lists without AR and with it,
  // each made when a plan first needs it.
  const int groups = plan.num_device_groups();
  const ScheduleKind kind = SimulatedKind(plan);
  const std::vector<int> shape = {static_cast<int>(kind), groups, plan.num_micro_batches,
                                  plan.virtual_stages};
  bool any_single = false, any_replicated = false;
  for (int s = 0; s < groups; ++s) {
    any_single = any_single || plan.stages[s].replicas() == 1;
    any_replicated = any_replicated || plan.stages[s].replicas() > 1;
  }
  auto find = [&](const auto& memo) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memo.find(shape);
    return it == memo.end() ? nullptr : it->second;
  };
  std::shared_ptr<const Lowered> single = find(single_), replicated = find(replicated_);
  auto make = [&](bool with_ar) {
    const std::shared_ptr<const Lowered>& other = with_ar ? single : replicated;
    auto made = std::make_shared<const Lowered>(
        other ? LowerListsFrom(*other, with_ar)
              : LowerLists(kind, groups, plan.num_micro_batches, plan.virtual_stages, with_ar));
    std::lock_guard<std::mutex> lock(mu_);
    return (with_ar ? replicated_ : single_).try_emplace(shape, std::move(made)).first->second;
  };
  if (any_single && !single) single = make(false);
  if (any_replicated && !replicated) replicated = make(true);
  const Schedule& some = single ? single->schedule : replicated->schedule;
  ScheduleView view{some.num_stages, some.num_micro_batches, some.num_chunks, {}};
  view.v_shape = some.v_shape;
  ListsChecked checked;  // CheckSimulable passed on each list when the memo made it
  for (int s = 0; s < groups; ++s) {
    const Lowered& l = plan.stages[s].replicas() > 1 ? *replicated : *single;
    view.programs.push_back(&l.schedule.programs[s]);
    checked.facts.push_back(&l.facts[s]);
  }
  SimResult r =
      SimulateSlowerThan(plan, view, cost, stop_above_ms, uncontended_first, &checked, &odds_);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = results_.try_emplace(std::move(key), r);
  // Keep the most a plan's runs told: a whole run over a stopped one, else the larger bound.
  if (!fresh && it->second.stopped && (!r.stopped || r.iteration_ms > it->second.iteration_ms))
    it->second = std::move(r);
  return it->second;
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
