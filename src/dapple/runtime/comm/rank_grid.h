// Which rank runs which stage replica, and how a micro-batch's rows move between stages of
// any replica counts (split-concat, docs/design.md section 1). Torch-free.
//
// In a plan with chunks (virtual_stages v > 1) a "stage" here is a device group: the plan's
// first S entries give the groups, and virtual stage (chunk) k runs on the group its
// placement says (Note [V placement] in common/chunk_placement.h: k mod S when looped). The
// boundaries and slices below take virtual stages; for other plans the two coincide.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dapple/common/chunk_placement.h"
#include "dapple/common/slicing.h"
#include "dapple/format/plan.h"

namespace dapple {

struct StageReplica {
  int stage = 0;
  int replica = 0;
};

// Rows of one micro-batch that one sender replica hands to one receiver replica across a
// stage boundary. `rows` are micro-batch-relative; every receiver's pieces, sorted by
// rows.begin, tile its slice exactly.
struct TransferPiece {
  int sender_replica = 0;
  int receiver_replica = 0;
  int sender_rank = 0;
  int receiver_rank = 0;
  SampleRange rows;
};

enum class Direction { kForward = 0, kBackward = 1 };

class RankGrid {
 public:
  // REQUIRES: the plan's devices are distinct ranks in 0..world_size-1; throws InputError
  // naming the plan `source` and the device otherwise, and when the plan uses more devices
  // than `world_size` or more message tags than the transport carries (MessageTagError).
  // Ranks the plan leaves out are idle (a planner may find that fewer
  // devices train faster, e.g. when a slow link costs more than the extra devices give).
  RankGrid(const Plan& plan, int world_size, const std::string& source);

  int world_size() const { return static_cast<int>(of_.size()); }
  int num_stages() const { return static_cast<int>(ranks_.size()); }  // device groups S
  int num_chunks() const { return chunks_; }                          // v
  int num_virtual_stages() const { return num_stages() * chunks_; }
  int num_micro_batches() const { return num_micro_batches_; }
  // The device group of virtual stage `vs`, and the virtual stage of a group's chunk.
  int GroupOf(int vs) const { return GroupOfVirtualStage(vs, num_stages(), v_shape_); }
  int VirtualStage(int group, int chunk) const {
    return VirtualStageOf(group, chunk, num_stages(), v_shape_);
  }
  // {-1, -1} for an idle rank.
  StageReplica Of(int rank) const { return of_.at(rank); }
  bool Idle(int rank) const { return of_.at(rank).stage < 0; }
  int num_active() const;  // ranks the plan uses
  const std::vector<int>& RanksOf(int stage) const { return ranks_.at(stage); }
  int replicas(int stage) const { return static_cast<int>(ranks_.at(stage).size()); }
  std::vector<int> Replicas() const;  // per stage

  // Rows of a micro-batch of `m` samples held by `replica` of virtual stage `stage` (SliceOf).
  SampleRange SliceRows(int stage, int replica, int64_t m) const;
  // Pieces crossing the boundary after virtual stage `boundary` (-> boundary+1) for a
  // micro-batch of `m` rows, sorted by (receiver_replica, rows.begin); each also sorted by
  // sender.
  std::vector<TransferPiece> Pieces(int boundary, int64_t m) const;
  // A tag unique per (virtual boundary, direction, micro-batch, sender, receiver) within a
  // step: the chunks of one pair of ranks never share a tag.
  uint32_t Tag(int boundary, Direction dir, int micro_batch, int sender_rank,
               int receiver_rank) const;
  // "rank 3 (stage 1, replica 0)", "rank 5 (idle)"
  std::string Describe(int rank) const;

 private:
  std::vector<StageReplica> of_;         // [rank]
  std::vector<std::vector<int>> ranks_;  // [device group][replica]
  int chunks_ = 1;
  bool v_shape_ = false;  // Note [V placement]
  int num_micro_batches_ = 1;
};

}  // namespace dapple
