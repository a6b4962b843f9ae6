// Held-out evaluation of the trained stages, run through the pipeline as training runs them:
// replica 0 of stage 0 forwards the test set chunk by chunk and sends each chunk's output to
// replica 0 of stage 1, and so on; the last stage computes the loss and, where the targets
// are classes, the accuracy. No rank needs another stage's layers, and no checkpoint is read.
// What crosses a boundary is what training sends there (one tensor or a tuple, boundary.h).
// An interleaved plan's virtual stages go through in the same way: a rank evaluates each
// chunk it holds (Note [Evaluation protocol] in evaluation.cc).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dapple/models/data.h"
#include "dapple/models/model.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/rank_grid.h"
#include "dapple/runtime/train/train_options.h"
#include "dapple/runtime/worker/boundary.h"

namespace dapple {

// One stage's part (on the rank that evaluates it).
struct EvalStage {
  int stage = 0;
  // This stage's layers on a chunk (no autograd, eval mode).
  std::function<Activations(const Activations&)> forward;
  // What this stage receives (stages after the first): the previous stage's outputs.
  BoundarySpec input;
  // The model's precision: a float32 output crosses to the next stage in its WireDtype.
  Precision precision = Precision::kFloat32;
  torch::Device device = torch::kCPU;
  // Stage 0: the held-out inputs. The last stage: the targets, and the model's mean loss.
  Batch held_out;
  std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& target)> loss;
};

struct EvalResult {
  int64_t samples = 0;
  double loss = 0;  // mean over the samples of the model's loss
  // Fraction of argmax predictions equal to the targets (per sample, or per token for a
  // language model), when the targets are classes and the output has a class dimension.
  std::optional<double> accuracy;
  std::optional<double> perplexity;  // exp(loss), language models only
};

// The EvalStage of held layers [first, last] of `model`, receiving `input` (stage > 0).
// `held_out` and `loss` are left empty. The caller switches the layers to eval mode.
EvalStage ModelEvalStage(Model& model, int stage, int first, int last, BoundarySpec input,
                         torch::Device device);

// Collective over every rank of `comm`. `stage_ranks[s]` is the rank that evaluates (virtual)
// stage s; `mine` are this rank's parts in stage order (none on every other rank). Rows go
// through in chunks of `chunk_rows`; `language_model` adds the perplexity. Returns the
// result on rank 0, std::nullopt elsewhere. Throws CommError when a peer fails.
// REQUIRES: stage 0's held_out.inputs and the last stage's held_out.targets have the same
// number of rows (> 0).
std::optional<EvalResult> EvaluatePipelined(Communicator& comm, const std::vector<int>& stage_ranks,
                                            const std::vector<EvalStage>& mine, int64_t chunk_rows,
                                            bool language_model);

// A stretch of layers a rank holds: stage `stage` of a plan, or virtual stage `stage` (chunk
// c of group g is c x S + g) of an interleaved one, with what it receives.
struct HeldStage {
  int stage = 0;
  int first_layer = 0, last_layer = 0;
  BoundarySpec input;
};

// Collective: `dapple train --eval`. Replica 0 of every device group evaluates the layers it
// holds (`held`, in stage order; empty on an idle rank) of `model` on the held-out split of
// `data` (at most o.eval_samples), which the ranks of the first and the last (virtual) stage
// hold (null elsewhere). Rank 0 prints the result (PrintEvaluation). The layers are back in
// training mode afterwards.
void EvaluateTrainedStages(const TrainOptions& o, Model& model, const RankGrid& grid, int rank,
                           const std::vector<HeldStage>& held, Dataset* data, torch::Device device,
                           Communicator& comm);

// Prints `r` on stdout as one line ("held-out: 10000 samples, loss 0.4123, accuracy
// 0.8512") or, with `json`, as {"eval": {...}}.
void PrintEvaluation(const EvalResult& r, const std::string& data, bool json);

}  // namespace dapple
