// The lowered lists that SimCache simulates plans on: per (schedule, S, M, v), with no stage
// replicated or with every stage replicated (AR before STEP), each with its facts.
#pragma once

#include <vector>

#include "dapple/common/schedule_kind.h"
#include "dapple/schedule/schedule.h"
#include "dapple/sim/list_facts.h"

namespace dapple {

struct LoweredLists {
  Schedule schedule;             // LowerComms of MakeSchedule; CheckSimulable passed on it
  std::vector<ListFacts> facts;  // [stage]: FactsOf its list
};

// Made anew: LowerComms(MakeSchedule(kind, S, M, v)) with AR on every stage or on none,
// checked (CheckSimulable throws on lists the simulator cannot run) and counted.
LoweredLists LowerLists(ScheduleKind kind, int num_stages, int num_micro_batches, int chunks,
                        bool with_allreduce);

// From `other`, the same shape's lists with AR on the other stages' side: the lists and facts
// LowerLists(.., with_allreduce) makes, without its check and counts (Note [Lists with and
// without AR]).
LoweredLists LowerListsFrom(const LoweredLists& other, bool with_allreduce);

}  // namespace dapple
