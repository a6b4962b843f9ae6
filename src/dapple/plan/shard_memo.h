// The sharding decisions of replicated stages, and their figures, kept per planner call
// (Note [Optimizer sharding in the planner] in refine/refine.h; Note [Stage costs kept]).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "dapple/plan/stage_cost.h"

namespace dapple {

// Note [Stage costs kept]
// To decide, ShardWhereItPays evaluates a replicated stage with its optimizer sharded and
// without, and the evaluation of its plan that follows (RecomputeWhereNeeded) evaluated it
// again: the memo keeps both figures with the decision, and EvaluatePlan / EvaluatePlanFrom
// take the decided one from it where their EvaluateStage call would have had the same
// arguments (the key's, and the same `uniform`). A replicated stage's evaluation is mostly its
// gradient buckets (GradientBuckets, BucketAllReduceMs, ExposedAllReduceMs), the dearest
// part of EvaluatePlan. The figures are EvaluateStage's, so the same bits.
// Thread-safe: two threads asking for one new stage may both decide it (alike).
class ShardMemo {
 public:
  // A stage's layers, devices, micro-batch size, micro-batches in flight (EvaluateStage's
  // warmup_depth), re-computation and overlap.
  using Key = std::tuple<int, int, std::vector<int>, int, int, bool, bool>;
  struct Known {
    bool pays = false;     // ShardingPays(whole, sharded)
    bool uniform = false;  // EvaluateStage's `uniform` of both
    StageCost whole, sharded;
  };
  // The decision kept for the stage (Find's arguments), else that of decide() (called
  // unlocked, returning a Known), kept. A decision kept is found without copying the devices.
  template <typename Decide>
  bool Pays(int first, int last, const std::vector<int>& devices, int micro_batch, int in_flight,
            bool recompute, bool overlap, Decide decide) {
    if (const Known* known = Find(first, last, devices, micro_batch, in_flight, recompute, overlap))
      return known->pays;
    Known made = decide();
    std::lock_guard<std::mutex> lock(mu_);
    return known_
        .try_emplace(Key{first, last, devices, micro_batch, in_flight, recompute, overlap},
                     std::move(made))
        .first->second.pays;
  }
  // What is kept for the stage, or nullptr; valid while the memo lives.
  const Known* Find(int first, int last, const std::vector<int>& devices, int micro_batch,
                    int in_flight, bool recompute, bool overlap) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it =
        known_.find(std::tie(first, last, devices, micro_batch, in_flight, recompute, overlap));
    return it == known_.end() ? nullptr : &it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<Key, Known, std::less<>> known_;
};

}  // namespace dapple
