// RankGrid: rank <-> (stage, replica) and the split-concat pieces between stages.
#include "dapple/runtime/comm/rank_grid.h"

#include <fmt/format.h>

#include <algorithm>

#include "dapple/common/error.h"
#include "dapple/common/schedule_kind.h"
#include "dapple/format/message_tags.h"

namespace dapple {

RankGrid::RankGrid(const Plan& plan, int world_size, const std::string& source)
    : chunks_(std::max(1, plan.virtual_stages)),
      v_shape_(VShaped(plan.schedule)),
      num_micro_batches_(std::max(1, plan.num_micro_batches)) {
  if (plan.num_devices() > world_size) {
    ThrowInput("{}: the plan uses {} devices but the job has {} processes (WORLD_SIZE / --nproc)",
               source, plan.num_devices(), world_size);
  }
  of_.assign(world_size, StageReplica{-1, -1});
  const int groups = plan.num_device_groups();
  for (int s = 0; s < plan.num_stages(); ++s) {
    const auto& devices = plan.stages[s].devices;
    if (devices.empty()) ThrowInput("{}: stages[{}].devices: empty", source, s);
    if (s >= groups) {  // a later chunk: the devices of its group (ValidatePlan)
      const int g = GroupOfVirtualStage(s, groups, v_shape_);
      if (devices != ranks_[g]) {
        ThrowInput("{}: stages[{}].devices: chunk {} must run on the devices of chunk {}", source,
                   s, s, g);
      }
      continue;
    }
    ranks_.push_back(devices);
    for (int j = 0; j < static_cast<int>(devices.size()); ++j) {
      int d = devices[j];
      if (d < 0 || d >= world_size) {
        ThrowInput("{}: stages[{}].devices: device {} is not a rank of a job of {} processes",
                   source, s, d, world_size);
      }
      if (of_[d].stage >= 0) {
        ThrowInput("{}: stages[{}].devices: device {} is already used by stage {}", source, s, d,
                   of_[d].stage);
      }
      of_[d] = {s, j};
    }
  }
  if (auto why = MessageTagError(plan, world_size)) ThrowInput("{}: {}", source, *why);
}

std::vector<int> RankGrid::Replicas() const {
  std::vector<int> r;
  for (const auto& v : ranks_) r.push_back(static_cast<int>(v.size()));
  return r;
}

SampleRange RankGrid::SliceRows(int stage, int replica, int64_t m) const {
  return SliceOf(m, replicas(GroupOf(stage)), replica);
}

std::vector<TransferPiece> RankGrid::Pieces(int boundary, int64_t m) const {
  DAPPLE_CHECK(boundary >= 0 && boundary + 1 < num_virtual_stages());
  const int from = GroupOf(boundary), to = GroupOf(boundary + 1);
  std::vector<TransferPiece> out;
  int rs = replicas(from), rr = replicas(to);
  for (int k = 0; k < rr; ++k) {
    SampleRange recv = SliceOf(m, rr, k);
    for (int j = 0; j < rs; ++j) {
      SampleRange send = SliceOf(m, rs, j);
      if (Overlap(send, recv) == 0) continue;
      SampleRange rows{std::max(send.begin, recv.begin), std::min(send.end, recv.end)};
      out.push_back({j, k, ranks_[from][j], ranks_[to][k], rows});
    }
  }
  return out;  // receivers ascending, senders ascending = rows ascending within a receiver
}

uint32_t RankGrid::Tag(int boundary, Direction dir, int micro_batch, int sender_rank,
                       int receiver_rank) const {
  int64_t t = MessageTag(boundary, static_cast<int>(dir), micro_batch, sender_rank, receiver_rank,
                         num_micro_batches_, world_size());
  // The constructor refused plans whose tags reach the limit (MessageTagError).
  DAPPLE_CHECK(t >= 0 && t < kMessageTagLimit, "tag overflow");
  return static_cast<uint32_t>(t);
}

int RankGrid::num_active() const {
  int n = 0;
  for (const auto& v : ranks_) n += static_cast<int>(v.size());
  return n;
}

std::string RankGrid::Describe(int rank) const {
  const auto& sr = of_.at(rank);
  if (sr.stage < 0) return fmt::format("rank {} (idle)", rank);
  return fmt::format("rank {} (stage {}, replica {})", rank, sr.stage, sr.replica);
}

}  // namespace dapple
