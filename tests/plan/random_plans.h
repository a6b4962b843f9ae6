// Plans of a random problem (random_problems.h) that exercise the simulator: each DP
// candidate under every schedule, with allreduce overlap and re-computation on or off, and
// its two-chunk interleaving where there is one.
#pragma once

#include <vector>

#include "dapple/plan/dp/dapple_dp.h"
#include "dapple/plan/interleaving.h"
#include "dapple/plan/planner.h"
#include "random_problems.h"

namespace dapple::testing {

inline std::vector<Plan> PlansOf(const RandomProblem& p) {
  std::vector<Plan> plans;
  for (int m : MicroBatchSizes(p.global_batch)) {
    DpOptions o;
    o.micro_batch_size = m;
    o.num_micro_batches = p.global_batch / m;
    o.enforce_memory = false;
    for (const DpCandidate& cand : DappleDp(*p.cost, p.cluster, o)) {
      for (ScheduleKind k :
           {ScheduleKind::kGPipe, ScheduleKind::kDappleA, ScheduleKind::kDappleB,
            ScheduleKind::kZbH1, ScheduleKind::kZbH2, ScheduleKind::kInterleaved}) {
        for (int variant = 0; variant < 4; ++variant) {
          Plan plan = cand.plan;
          plan.schedule = k;
          plan.allreduce_overlap = variant & 1;
          plan.stages.back().recompute = variant & 2;  // the fake times every forward
          plans.push_back(plan);
        }
      }
      for (const Proposal& q : InterleavedProposals(cand.plan, *p.cost, {m}, p.global_batch))
        if (q.plan.virtual_stages == 2) plans.push_back(q.plan);
    }
  }
  return plans;
}

}  // namespace dapple::testing
