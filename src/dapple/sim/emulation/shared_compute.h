// Devices that are processes sharing one machine's cores (Note [Emulated devices] in
// format/cluster.h): the engine's terms for them, and the stretch of every compute
// instruction iterated to a fixed point (Note [Shared compute] in shared_compute.cc).
// Internal to dapple_sim; the simulator's one hook for emulation.
#pragma once

#include <vector>

#include "dapple/cost/emulation_costs.h"
#include "dapple/format/plan.h"
#include "dapple/sim/event_engine.h"

namespace dapple::internal {

// The resume and wake-up times and the compute loads of every transfer route and allreduce
// of `plan` into `setup` (prepared for `plan`: its routes and stages in place).
void AddEmulationTerms(const Plan& plan, const EmulationCosts& emulation, EngineSetup& setup);

// Runs `setup` until the stretches settle (at most a few dozen runs) and returns the last
// run, with setup.op_scale holding the stretches it used. REQUIRES: shared_compute > 0.
EngineResult RunWithSharedCompute(EngineSetup& setup, double shared_compute);

}  // namespace dapple::internal
