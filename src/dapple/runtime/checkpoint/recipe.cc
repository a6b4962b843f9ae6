// RecipeOf and CompareRecipes: see Note [Recipes in checkpoints] in recipe.h.
#include "dapple/runtime/checkpoint/recipe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "dapple/common/error.h"
#include "dapple/runtime/checkpoint/checkpoint.h"

namespace dapple {
namespace {

// The settings a resume must keep, with the flag that sets each.
const std::map<std::string, std::string>& KeptSettings() {
  static const std::map<std::string, std::string> kept = {
      {"adam_betas", "--adam-betas"},
      {"adam_eps", "--adam-eps"},
      {"no_decay_on_norm_and_bias", "--no-decay-on-norm-and-bias"}};
  return kept;
}

}  // namespace

Recipe RecipeOf(const OptimizerOptions& o, const LrSchedule& schedule, double clip_grad_norm,
                int64_t steps, Precision precision) {
  Recipe r;
  r["precision"] = ToString(precision);
  r["lr"] = fmt::format("{}", o.lr);
  r["lr_schedule"] = ToString(schedule.kind);
  r["warmup_steps"] = fmt::format("{}", schedule.warmup_steps);
  r["min_lr"] = fmt::format("{}", schedule.min_lr);
  r["clip_grad_norm"] = clip_grad_norm > 0 ? fmt::format("{}", clip_grad_norm) : "off";
  r["weight_decay"] = o.weight_decay >= 0 ? fmt::format("{}", o.weight_decay) : "default";
  r["no_decay_on_norm_and_bias"] = o.no_decay_on_norm_and_bias ? "true" : "false";
  r["steps"] = fmt::format("{}", steps);
  if (o.kind != OptimizerKind::kSgd) {
    r["adam_betas"] = fmt::format("{},{}", o.beta1, o.beta2);
    r["adam_eps"] = fmt::format("{}", o.eps);
  }
  return r;
}

std::optional<std::string> CompareRecipes(const Recipe& saved, const Recipe& now,
                                          const std::string& where) {
  if (saved.empty()) return std::nullopt;
  std::vector<std::string> changes;
  for (const auto& [name, value] : now) {
    auto it = saved.find(name);
    if (it == saved.end() || it->second == value) continue;
    auto kept = KeptSettings().find(name);
    if (kept == KeptSettings().end()) {
      changes.push_back(fmt::format("{} {} (was {})", name, value, it->second));
      continue;
    }
    if (name == "no_decay_on_norm_and_bias") {
      ThrowInput("{}: the run {} decay biases and normalisation weights; resume {} {}", where,
                 it->second == "true" ? "did not" : "did",
                 it->second == "true" ? "with" : "without", kept->second);
    }
    ThrowInput("{}: {} is {}, not {}; the optimizer state was built with it (pass {} {})", where,
               name, it->second, value, kept->second, it->second);
  }
  if (changes.empty()) return std::nullopt;
  return fmt::format("dapple train: resuming from {} with {}", where, fmt::join(changes, ", "));
}

void CheckRecipeOfLatestCheckpoint(const std::filesystem::path& checkpoint_dir, const Recipe& now) {
  const std::optional<std::filesystem::path> latest = LatestCheckpoint(checkpoint_dir);
  if (!latest) return;
  Recipe saved;
  try {
    saved = ReadCheckpointMeta(*latest).recipe;
  } catch (const InputError&) {
    return;  // damaged: the ranks fall back to an older checkpoint (Note [Checkpoint checksums])
  }
  CompareRecipes(saved, now, (*latest / "meta.json").string());
}

}  // namespace dapple
