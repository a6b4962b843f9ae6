// The lowered lists of SimCache: see lowered_lists.h.
#include "dapple/plan/search/lowered_lists.h"

#include "dapple/common/error.h"
#include "dapple/sim/simulator.h"

namespace dapple {

LoweredLists LowerLists(ScheduleKind kind, int num_stages, int num_micro_batches, int chunks,
                        bool with_allreduce) {
  LoweredLists made;
  made.schedule = LowerComms(MakeSchedule(kind, num_stages, num_micro_batches, chunks),
                             std::vector<int>(num_stages, with_allreduce ? 2 : 1));
  const Schedule& lists = made.schedule;
  CheckSimulable(ViewOf(lists));
  for (const std::vector<Instruction>& p : lists.programs)
    made.facts.push_back(FactsOf(p.data(), static_cast<int>(p.size()), lists.num_chunks));
  return made;
}

// Note [Lists with and without AR]
// LowerComms ends every list with STEP, and with AR just before it on a replicated stage;
// the rest of a list does not depend on its replicas. So one shape's lists with AR are its
// lists without, AR put in before STEP (and those without, AR taken out), and so are their
// facts: CheckSimulable skips AR and STEP, and FactsOf's counts and last positions are of
// instructions before them, but the count of AR's and the AR's position (just before the
// list's last instruction, STEP). Planning with overlap simulates many
// shapes both ways: the check and the counts of the second were a third of the lowering.
LoweredLists LowerListsFrom(const LoweredLists& other, bool with_allreduce) {
  LoweredLists made = other;
  for (std::vector<Instruction>& p : made.schedule.programs) {
    DAPPLE_CHECK(!p.empty() && p.back().op == Op::kOptimizerStep, "a lowered list ends in STEP");
    if (with_allreduce) {
      p.insert(p.end() - 1, Instruction{Op::kAllReduceGrads, -1, 0});
    } else {
      DAPPLE_CHECK(p.size() >= 2 && p[p.size() - 2].op == Op::kAllReduceGrads, "AR before STEP");
      p.erase(p.end() - 2);
    }
  }
  for (size_t s = 0; s < made.facts.size(); ++s) {
    ListFacts& f = made.facts[s];
    f.allreduces += with_allreduce ? 1 : -1;
    f.last_allreduce_pc =
        with_allreduce ? static_cast<int>(made.schedule.programs[s].size()) - 2 : -1;
  }
  return made;
}

}  // namespace dapple
