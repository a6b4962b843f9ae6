// The global gradient norm's allreduce in a simulated iteration (`dapple simulate
// --clip-grad-norm`, Note [Global gradient clipping] in the runtime's grad_clipping.h).
// Internal to dapple_sim.
#pragma once

#include <vector>

#include "dapple/sim/event_engine.h"

namespace dapple::internal {

// Note [The norm's allreduce in the simulator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With clipping, every device's optimizer step waits for one scalar allreduce over all the
// plan's devices, which starts when the last device has reached its STEP (its stage's
// gradients complete). STEP is the last instruction of every list and nothing of the
// iteration follows it, so the engine's run is exact up to the STEPs: this moves each
// device's STEP to after the allreduce, which takes `norm_ms` from the latest arrival.
// The STEP keeps the duration the run gave it (with shared compute, its stretched one).
// Adds the allreduce (category "allreduce", name "NORM") to the timeline when it has one.
void AddGlobalNormAllReduce(const EngineSetup& setup, double norm_ms, EngineResult& run);

}  // namespace dapple::internal
