// Devices that share one machine's cores (Note [Shared compute] in shared_compute.cc): the
// stretch of every compute instruction, iterated to a fixed point. Internal to dapple_sim.
#pragma once

#include <vector>

#include "dapple/sim/event_engine.h"

namespace dapple::internal {

// Runs `setup` until the stretches settle (at most a few dozen runs) and returns the last
// run, with setup.op_scale holding the stretches it used. REQUIRES: shared_compute > 0.
EngineResult RunWithSharedCompute(EngineSetup& setup, double shared_compute);

}  // namespace dapple::internal
