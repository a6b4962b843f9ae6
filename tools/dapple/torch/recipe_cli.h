// The options of `dapple train` that make up a training recipe beside the optimizer's kind
// and rate: the learning-rate schedule (--lr-schedule, --warmup-steps, --min-lr), global
// gradient clipping (--clip-grad-norm), Adam's betas and epsilon, and weight decay that
// skips biases and normalisation weights. Declared once, checked in one place.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "dapple/runtime/train/train_options.h"

namespace dapple {

struct RecipeCli {
  std::string lr_schedule = "constant";
  std::string adam_betas;  // "B1,B2"; empty: Adam's defaults
  CLI::Option* adam_eps = nullptr;
  CLI::Option* clip_grad_norm = nullptr;
};

// Declares the options on `cmd`, storing into *cli and *o (which must outlive parsing).
void AddRecipeOptions(CLI::App* cmd, RecipeCli* cli, TrainOptions* o);

// Fills o.lr_schedule and the optimizer's betas from *cli and checks every value: throws
// InputError with one line naming the flag (a negative clip, a warm-up longer than the
// run, --min-lr above --lr, an unknown schedule, Adam's settings for SGD). REQUIRES:
// o.optimizer.kind, o.optimizer.lr and o.steps are final.
void FinishRecipe(const RecipeCli& cli, TrainOptions& o);

}  // namespace dapple
