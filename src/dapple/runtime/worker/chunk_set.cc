// ChunkSet: see chunk_set.h (Note [Chunks in the runtime]).
#include "dapple/runtime/worker/chunk_set.h"

#include <fmt/format.h>

#include <set>

#include "dapple/common/error.h"
#include "dapple/common/schedule_kind.h"
#include "dapple/models/model_source.h"
#include "dapple/runtime/worker/boundary.h"
#include "dapple/runtime/worker/fault_injector.h"

namespace dapple {

std::vector<std::pair<int, int>> HeldRanges(const Plan& plan, const RankGrid& grid, int rank) {
  std::vector<std::pair<int, int>> ranges;
  if (grid.Idle(rank)) return ranges;
  const int g = grid.Of(rank).stage;
  for (int c = 0; c < grid.num_chunks(); ++c) {
    const StagePlan& sp = plan.stages[grid.VirtualStage(g, c)];
    ranges.emplace_back(sp.first_layer, sp.last_layer);
  }
  return ranges;
}

LayerRange HeldLayerRange(const std::vector<std::pair<int, int>>& ranges) {
  if (ranges.empty()) return kNoLayers;
  LayerRange held{ranges[0].first, ranges[0].second, {}};
  held.more.assign(ranges.begin() + 1, ranges.end());
  return held;
}

std::vector<int> HeldLayerIndices(const std::vector<std::pair<int, int>>& ranges) {
  std::vector<int> layers;
  for (const auto& [first, last] : ranges)
    for (int l = first; l <= last; ++l) layers.push_back(l);
  return layers;
}

std::vector<torch::Tensor> HeldParameters(const Model& model,
                                          const std::vector<std::pair<int, int>>& ranges) {
  std::vector<torch::Tensor> params;
  std::set<const void*> seen;
  for (const auto& [first, last] : ranges)
    for (const auto& p : model.Parameters(first, last))
      if (seen.insert(p.unsafeGetTensorImpl()).second) params.push_back(p);
  return params;
}

std::optional<std::string> ChunkedPlanError(const Plan& plan, const Model& model) {
  if (plan.virtual_stages <= 1) return std::nullopt;
  // Note [Tied parameters] across chunks: a rank may hold several uses in different chunks;
  // not built.
  for (const SharedParameter& sp : model.shared_parameters) {
    std::set<int> stages;
    for (const auto& [layer, name] : sp.uses)
      for (int s = 0; s < plan.num_stages(); ++s)
        if (layer >= plan.stages[s].first_layer && layer <= plan.stages[s].last_layer)
          stages.insert(s);
    if (stages.size() > 1) {
      return fmt::format(
          "virtual_stages: parameter '{}' of layer {} is tied to layers of other chunks; dapple "
          "train does not run tied parameters across the chunks of an interleaved plan "
          "(virtual_stages {}); plan with --schedule dapple-b or zb-h1",
          sp.uses[0].second, model.layers.at(sp.uses[0].first).name, plan.virtual_stages);
    }
  }
  return std::nullopt;
}

ChunkSet::ChunkSet(Model& model, const Plan& plan, const RankGrid& grid, int rank,
                   const std::vector<Instruction>& program, Communicator& comm,
                   torch::optim::Optimizer& optimizer, torch::Device device,
                   StageWorkerOptions options, bool recompute_all)
    : program_(program), who_(grid.Describe(rank)), faults_(options.faults) {
  const int V = grid.num_virtual_stages(), v = grid.num_chunks();
  const auto [g, replica] = grid.Of(rank);
  bool has_ar = false;
  for (const auto& inst : program_) has_ar = has_ar || inst.op == Op::kAllReduceGrads;
  for (int c = 0; c < v; ++c) {
    const int vs = grid.VirtualStage(g, c);
    const StagePlan& sp = plan.stages[vs];
    // Boundary shapes (as the trainer's for one stage): vs-1's output comes from the store.
    BoundarySpec in =
        vs == 0
            ? ModelInputSpec(model)
            : BoundarySpecFromJson(comm.Lookup(
                  fmt::format("boundary{}", vs - 1),
                  fmt::format("{}: waiting for virtual stage {}'s output shapes", who_, vs - 1)));
    BoundarySpec out = ProbeStage(model, sp.first_layer, sp.last_layer, in, device);
    if (replica == 0 && vs + 1 < V)
      comm.Publish(fmt::format("boundary{}", vs), BoundarySpecToJson(out));
    if (c > 0 && sp.replicas() > 1) comm.CreateGroup(fmt::format("stage{}", vs), sp.devices);
    // This chunk's instructions in group order; AR for every chunk, STEP for chunk 0.
    std::vector<Instruction> mine;
    for (const auto& inst : program_)
      if (inst.op != Op::kAllReduceGrads && inst.op != Op::kOptimizerStep && inst.chunk == c)
        mine.push_back(inst);
    if (has_ar) mine.push_back({Op::kAllReduceGrads, -1, 0});
    if (c == 0) mine.push_back({Op::kOptimizerStep, -1, 0});
    StageWorkerOptions o = options;
    o.virtual_stage = vs;
    o.rank_live = &live_;
    o.recompute = recompute_all || plan.Recomputes(vs);
    o.recompute_layers = plan.stages[vs].recompute_layers;
    o.faults = nullptr;  // RunStep's own, on the group's list
    inputs_.push_back(in);
    workers_.push_back(std::make_unique<StageWorker>(model, grid, rank, std::move(mine), in, out,
                                                     comm, optimizer, device, sp.first_layer,
                                                     sp.last_layer, o));
  }
}

StepResult ChunkSet::RunStep(int64_t step, const Batch& batch) {
  for (auto& w : workers_) w->BeginStep(step, batch);
  std::vector<int> pc(workers_.size(), 0);  // next instruction of each chunk's list
  std::vector<TimelineEvent> events;
  auto run = [&](const Instruction& inst, size_t c) {
    workers_.at(c)->Run(inst, pc[c]++, &events);
  };
  for (size_t i = 0; i < program_.size(); ++i) {
    const Instruction& inst = program_[i];
    if (faults_) faults_->MidStep(step, i, program_.size(), who_, ToString(inst));
    if (inst.op == Op::kAllReduceGrads) {
      for (size_t c = 0; c < workers_.size(); ++c) run(inst, c);
    } else {
      run(inst, inst.op == Op::kOptimizerStep ? 0 : static_cast<size_t>(inst.chunk));
    }
  }
  StepResult result;
  for (size_t c = 0; c < workers_.size(); ++c) {
    DAPPLE_CHECK(pc[c] == static_cast<int>(workers_[c]->program().size()),
                 "a chunk's instructions left over");
    StepResult r = workers_[c]->EndStep(c == 0 ? std::move(events) : std::vector<TimelineEvent>{});
    result.loss_part += r.loss_part;
    result.events.insert(result.events.end(), r.events.begin(), r.events.end());
  }
  return result;
}

}  // namespace dapple
