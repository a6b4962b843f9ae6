// The training settings a checkpoint records beside the optimizer's kind, and what a resumed
// run may change of them.
//
// Note [Recipes in checkpoints]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A checkpoint's optimizer state (Adam's moments) was accumulated under the run's betas, its
// epsilon and its choice of which parameters decay; a resume under other values would
// silently train a different model than either setting, so it is refused in one line that
// names the flag to pass. The learning rate, its schedule, the clipping threshold, the weight
// decay and the step count are what people change on purpose when they resume (to train
// longer, or to lower the rate); a resume that changes them says so in one line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "dapple/common/precision.h"
#include "dapple/runtime/optim/lr_schedule.h"
#include "dapple/runtime/optim/optimizer.h"

namespace dapple {

// Setting name -> value as text ("lr_schedule" -> "cosine"); Adam's settings only for Adam
// and AdamW. clip_grad_norm <= 0: no clipping. The precision is a setting a resume may
// change (the checkpoint holds float32 master weights either way).
using Recipe = std::map<std::string, std::string>;
Recipe RecipeOf(const OptimizerOptions& o, const LrSchedule& schedule, double clip_grad_norm,
                int64_t steps, Precision precision);

// Compares a checkpoint's recipe (`saved`, read from `where`; empty in checkpoints written
// before recipes: nothing to compare) with this run's. Throws InputError when a setting of
// the optimizer's state differs; returns one line listing the other settings that change,
// or nullopt when none does.
std::optional<std::string> CompareRecipes(const Recipe& saved, const Recipe& now,
                                          const std::string& where);

// For a launcher, before any process starts: CompareRecipes of the newest checkpoint in
// `checkpoint_dir` (when there is one whose meta reads) against `now`, so that a refused
// resume is one line; the ranks compare again and tell the other changes.
void CheckRecipeOfLatestCheckpoint(const std::filesystem::path& checkpoint_dir, const Recipe& now);

}  // namespace dapple
