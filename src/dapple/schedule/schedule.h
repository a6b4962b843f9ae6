// A schedule: one ordered instruction list per stage; every replica of a stage runs its
// stage's list on its own slice of each micro-batch. Generators emit compute-only lists;
// LowerComms adds the communication; Validate dry-runs all lists together.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dapple/common/chunk_placement.h"
#include "dapple/common/schedule_kind.h"
#include "dapple/schedule/instruction.h"

namespace dapple {

// Note [Chunks]: in an interleaved schedule (docs/schedules.md, "Interleaved 1F1B") the model
// is cut into num_stages x num_chunks virtual stages; stage (device group) g runs chunks
// c = 0..v-1, and chunk c of g is virtual stage c * num_stages + g, so the neighbours of a
// virtual stage are on the neighbouring groups and the last group sends to the first. With
// one chunk the virtual stages are the stages. The V-shape schedules place their two chunks
// in a V instead (Note [V placement] in chunk_placement.h): chunk 1 of g is 2S - 1 - g.
struct Schedule {
  int num_stages = 0;  // device groups: one program each
  int num_micro_batches = 0;
  int num_chunks = 1;                              // model chunks per stage (v)
  bool v_shape = false;                            // Note [V placement]; only with v = 2
  std::vector<std::vector<Instruction>> programs;  // [stage]
  int num_virtual_stages() const { return num_stages * num_chunks; }
  int VirtualStage(int stage, int chunk) const {
    return VirtualStageOf(stage, chunk, num_stages, v_shape);
  }
  int StageOf(int virtual_stage) const {
    return GroupOfVirtualStage(virtual_stage, num_stages, v_shape);
  }
};

// Warm-up depth K_s: forwards stage s runs before its first backward.
// gpipe: M; dapple-a and zb-h1: min(S-s, M); dapple-b, zb-h2 (and interleaved with one chunk):
// min(2(S-s)-1, M); zb-v: the same, forwards of chunk 0 (Note [ZB-V]); v-half and v-min:
// the forwards of both chunks that open the list (Note [V-Half and V-Min]).
int WarmupDepth(ScheduleKind kind, int stage, int num_stages, int num_micro_batches);
// Most micro-batches stage s holds activations of at once (from F to B, or to W in the
// split schedules): WarmupDepth, except zb-h1: min(S, M) on every stage (Note [ZB-H1]), and
// zb-h2: up to min(2S-1, M) on every stage, counted on its list (Note [ZB-H2]).
// Interleaved with v chunks: chunk-micro-batches (each a chunk's activations),
// min((v-1)S + 2(S-s) - 1, vM) (Note [Interleaved 1F1B]). zb-v: chunk-micro-batches too,
// 2S on every stage once M >= 2S - 1 (Note [ZB-V]); v-half at most 2((S+2)/2), v-min at
// most 2((S+4)/3) (Note [V-Half and V-Min]).
int PeakInFlight(ScheduleKind kind, int stage, int num_stages, int num_micro_batches,
                 int num_chunks = 1);

// Compute-only programs: F and B, or F, I and W for the kinds that split the backward
// (SplitsBackward); with num_chunks v > 1 (`interleaved`, and the V-shape kinds with v = 2 in a V)
// each instruction names its chunk. Throws InputError for non-positive sizes, and for v > 1 with
// another kind, with one stage, or with M not a multiple of S (CheckChunks).
Schedule MakeSchedule(ScheduleKind kind, int num_stages, int num_micro_batches, int num_chunks = 1);
// Adds RA before each F and SA after it (except on the first / last stage), RG before each
// B or I and SG after it (except on the last / first stage), nothing around W, then AR (only where
// replicas[s] > 1) and STEP at the end of every program. REQUIRES: compute-only input,
// replicas.size() == num_stages. With chunks the neighbours are virtual stages (Note [Chunks]):
// RA and SG are left out only on the first virtual stage, SA and RG on the last.
Schedule LowerComms(const Schedule& compute_only, const std::vector<int>& replicas);

// Dry-runs all lists together (sends never block; a receive blocks until its send ran).
// Returns nullopt when sound, else one line naming the stage, micro-batch and instruction
// of the first problem: an unmatched send or receive, a duplicated or missing F/B, a
// backward before its forward, or a deadlock (with what each blocked stage waits on).
std::optional<std::string> FindScheduleError(const Schedule& lowered);

// One line per stage: "stage 0: F0 F1 B0 F2 B1 B2", after a line "placement: v" when the
// chunks are in a V. ParseScheduleText reads it back (throws InputError naming the line).
std::string ScheduleToText(const Schedule& s);
Schedule ParseScheduleText(const std::string& text);

}  // namespace dapple
