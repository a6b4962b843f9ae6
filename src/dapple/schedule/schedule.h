// A schedule: one ordered instruction list per stage; every replica of a stage runs its
// stage's list on its own slice of each micro-batch. Generators emit compute-only lists;
// LowerComms adds the communication; Validate dry-runs all lists together.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dapple/common/schedule_kind.h"
#include "dapple/schedule/instruction.h"

namespace dapple {

struct Schedule {
  int num_stages = 0;
  int num_micro_batches = 0;
  std::vector<std::vector<Instruction>> programs;  // [stage]
};

// Warm-up depth K_s: forwards stage s runs before its first backward.
// gpipe: M; dapple-a and zb-h1: min(S-s, M); dapple-b: min(2(S-s)-1, M).
int WarmupDepth(ScheduleKind kind, int stage, int num_stages, int num_micro_batches);
// Most micro-batches stage s holds activations of at once (from F to B, or to W in the
// split schedules): WarmupDepth, except zb-h1: min(S, M) on every stage (Note [ZB-H1]).
int PeakInFlight(ScheduleKind kind, int stage, int num_stages, int num_micro_batches);

// Compute-only programs: F and B, or F, I and W for the kinds that split the backward
// (SplitsBackward). Throws InputError for non-positive sizes.
Schedule MakeSchedule(ScheduleKind kind, int num_stages, int num_micro_batches);

// Adds RA before each F and SA after it (except on the first / last stage), RG before each
// B or I and SG after it (except on the last / first stage), nothing around W, then AR (only where
// replicas[s] > 1) and STEP at the end of every program. REQUIRES: compute-only input,
// replicas.size() == num_stages.
Schedule LowerComms(const Schedule& compute_only, const std::vector<int>& replicas);

// Dry-runs all lists together (sends never block; a receive blocks until its send ran).
// Returns nullopt when sound, else one line naming the stage, micro-batch and instruction
// of the first problem: an unmatched send or receive, a duplicated or missing F/B, a
// backward before its forward, or a deadlock (with what each blocked stage waits on).
std::optional<std::string> FindScheduleError(const Schedule& lowered);

// One line per stage: "stage 0: F0 F1 B0 F2 B1 B2". ParseScheduleText reads it back
// (throws InputError naming the line).
std::string ScheduleToText(const Schedule& s);
Schedule ParseScheduleText(const std::string& text);

}  // namespace dapple
