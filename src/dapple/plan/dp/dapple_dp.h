// DAPPLE's dynamic program (docs/design.md section 6) for one micro-batch size: the partition,
// replica counts and placement of the plans with the smallest latency L.
#pragma once

#include <optional>
#include <vector>

#include "dapple/common/schedule_kind.h"
#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"

namespace dapple {

struct DpOptions {
  int micro_batch_size = 1;
  int num_micro_batches = 1;
  // Whose warm-up depths K_s the memory check uses (dapple-a has the smallest).
  ScheduleKind memory_schedule = ScheduleKind::kDappleA;
  bool enforce_memory = true;
  // When set (with deeper warm-up depths than memory_schedule's), the DP counts in
  // DpStats::deeper_misfits the stages it accepted that would not fit with this schedule's
  // depths (every stage on devices of different speeds or memory, which it does not
  // tabulate). None: the DP with memory_schedule = deeper_schedule decides alike and
  // returns the same plans (DpCandidate::peak_memory_bytes aside).
  std::optional<ScheduleKind> deeper_schedule;
  int top_k = 8;       // complete plans returned, by ascending L
  int max_blocks = 0;  // layer coarsening (layer_blocks.h); 0: DefaultMaxBlocks
  // Per block, the states with the smallest score are kept (a beam); 0: every state up
  // to 2000 on clusters of at most 64 devices, 48 beyond.
  int max_states = 0;
  // Suffixes kept per state (the paper keeps 1); 0: 4 when blocks x devices <= 160, else 1.
  int suffixes_per_state = 0;
};

struct DpCandidate {
  Plan plan;  // stages, micro-batching and schedule = memory_schedule; no estimate
  double latency_ms = 0;
  double peak_memory_bytes = 0;
};

struct DpStats {
  long long states = 0;
  long long transitions = 0;
  long long deeper_misfits = 0;  // see DpOptions::deeper_schedule
};

// The DP runs backwards over layer blocks: state (i, u) = the layers from block i on are
// planned as stages on devices with per-server usage u (u is summarised as the multiset of
// usages when all servers are identical: Note [Canonical usage states] in dp_state.h),
// keeping the suffixes whose score is smallest.
// The score is L of the suffix plus a head stage made of all layers before block i on the
// free devices (at most m of them), as the paper's T_PL. A transition prepends one stage
// (a block range, a replica count n <= m, a placement policy). Going backwards makes each
// new stage's position from the end known, hence its warm-up depth K_s and its memory,
// which must fit (static + K_s x activations of its slice). Deterministic.
std::vector<DpCandidate> DappleDp(const CostModel& cost, const Cluster& cluster,
                                  const DpOptions& options, DpStats* stats = nullptr);

}  // namespace dapple
