// The schedule families (docs/design.md section 3). Lives in common because both the plan
// format and the schedule generators name them.
#pragma once

#include <string>
#include <vector>

namespace dapple {

// kZbH1: zero bubble H1 (Qi et al., ICLR 2024): each backward split into I (input gradient)
// and W (weight gradient), W deferred into the bubbles (docs/schedules.md).
// kInterleaved: interleaved 1F1B (Narayanan et al., SC'21): every device group runs v model
// chunks (the plan's virtual_stages); with v = 1 it is dapple-b's order.
// kZbV: zero bubble V (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS
// 2024): two chunks per device group in a V (Note [V placement] in chunk_placement.h), the
// backward split as in zb-h1 (docs/schedules.md, "ZB-V").
// kVHalf, kVMin: the same V at about a half and a third of ZB-V's activation memory, for a
// bubble (same paper; docs/schedules.md, "V-Half and V-Min").
// kZbH2: zero bubble H2 (the ICLR 2024 paper): zb-h1's split with dapple-b's warm-up and up to
// 2s weight gradients deferred on stage s, a parallelogram that has no bubble in steady state
// at twice zb-h1's activations (docs/schedules.md, "ZB-H2 and steady state").
enum class ScheduleKind {
  kGPipe,
  kDappleA,
  kDappleB,
  kZbH1,
  kInterleaved,
  kZbV,
  kVHalf,
  kVMin,
  kZbH2
};

// "gpipe", "dapple-a", "dapple-b", "zb-h1", "interleaved", "zb-v", "v-half", "v-min", "zb-h2"
std::string ToString(ScheduleKind k);
// True for the kinds whose backward is split into I and W instructions.
bool SplitsBackward(ScheduleKind k);
// True for the kinds that place two chunks per device group in a V (Note [V placement]).
bool VShaped(ScheduleKind k);
// Throws InputError listing the known names.
ScheduleKind ParseScheduleKind(const std::string& s);
// Every schedule kind, in the order of the enum: the one list that names them all.
std::vector<ScheduleKind> AllScheduleKinds();
// Their names joined by ", " ("gpipe, dapple-a, ..."), for help texts and error messages.
std::string ScheduleNames();
// Chunk counts the schedules can run, else InputError naming `field_prefix` + the field
// ("plan.json: virtual_stages: ..."): v < 1; a V-shaped kind with v other than 2; v > 1
// with a kind other than interleaved or a V-shaped one, or on one stage; and for
// interleaved with v > 1, M < S ("fewer micro-batches than stages") or M not a multiple of S.
void CheckChunks(ScheduleKind kind, int num_stages, int num_micro_batches, int num_chunks,
                 const std::string& field_prefix = "");

}  // namespace dapple
