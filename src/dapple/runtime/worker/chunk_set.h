// A rank of an interleaved plan (docs/runtime.md, "Interleaved 1F1B"): it holds the layers of
// its device group's v chunks and runs the group's one lowered instruction list, each
// instruction by the StageWorker of its chunk (the same interpreter switch as every plan).
//
// Note [Chunks in the runtime]: chunk c of device group g is virtual stage vs = c*S + g, and
// its StageWorker is the worker of that virtual stage: its own slots, receive queues and
// boundaries (split-concat against the groups of vs-1 and vs+1, which may differ in width),
// and message tags of its own virtual boundary (RankGrid::Tag), so the chunks of one pair of
// ranks never share a tag. Each chunk allreduces its gradients in a process group of its own
// ("stage<vs>", same ranks), so the buckets of different chunks never interleave on one
// group; with overlap on, chunk c's buckets start during chunk c's last backward. AR is
// dispatched to every chunk; STEP to chunk 0 only, whose optimizer holds every chunk's
// parameters. Checkpoints stay per layer, so they do not depend on the plan.
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dapple/format/plan.h"
#include "dapple/models/model.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/rank_grid.h"
#include "dapple/runtime/worker/stage_worker.h"

namespace dapple {

// The layer ranges [first, last] rank `rank` holds: its stage's, or one per chunk in chunk
// order; none for an idle rank.
std::vector<std::pair<int, int>> HeldRanges(const Plan& plan, const RankGrid& grid, int rank);
// The same as a LayerRange for LoadModel (kNoLayers when empty).
LayerRange HeldLayerRange(const std::vector<std::pair<int, int>>& ranges);
// The layer indices of `ranges`, in order.
std::vector<int> HeldLayerIndices(const std::vector<std::pair<int, int>>& ranges);
// The parameters of the layers of `ranges` (held), each once.
std::vector<torch::Tensor> HeldParameters(const Model& model,
                                          const std::vector<std::pair<int, int>>& ranges);

// Why `plan` (with chunks) cannot be trained, as one line naming the field or flag; nullopt
// when it can or has no chunks. `model` may hold no layer (names and shared parameters).
std::optional<std::string> ChunkedPlanError(const Plan& plan, const Model& model);

class ChunkSet {
 public:
  // Collective over the ranks of the plan: the boundary shapes go through the store in
  // virtual-stage order (chunk c of group g waits for virtual stage c*S+g-1), and each chunk
  // after the first with several replicas forms its group "stage<vs>" (chunk 0's, "stage<g>",
  // is the caller's). `program`: the group's lowered list. `options` is every chunk's except
  // `recompute`, which is `recompute_all` or the plan's per chunk.
  ChunkSet(Model& model, const Plan& plan, const RankGrid& grid, int rank,
           const std::vector<Instruction>& program, Communicator& comm,
           torch::optim::Optimizer& optimizer, torch::Device device, StageWorkerOptions options,
           bool recompute_all);
  ChunkSet(const ChunkSet&) = delete;  // the workers point at live_
  ChunkSet& operator=(const ChunkSet&) = delete;

  // One step of the group's list (StageWorker::RunStep's contract).
  StepResult RunStep(int64_t step, const Batch& batch);

  // What chunk `c` receives (its boundary spec). REQUIRES: 0 <= c < v.
  const BoundarySpec& input(int c) const { return inputs_.at(c); }

  // Peaks of live activations of all chunks together ((chunk, micro-batch) pairs, bytes).
  int peak_live_micro_batches() const { return live_.peak_mbs; }
  int64_t peak_live_bytes() const { return live_.peak_bytes; }

 private:
  std::vector<Instruction> program_;
  std::vector<std::unique_ptr<StageWorker>> workers_;  // [chunk]
  std::vector<BoundarySpec> inputs_;                   // [chunk]
  LiveCount live_;
  std::string who_;
  const FaultInjector* faults_;  // Note [Fault injection]
};

}  // namespace dapple
