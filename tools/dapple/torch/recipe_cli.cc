// AddRecipeOptions and FinishRecipe: see recipe_cli.h.
#include "recipe_cli.h"

#include <cmath>
#include <cstdio>

#include "dapple/common/error.h"

namespace dapple {

void AddRecipeOptions(CLI::App* cmd, RecipeCli* cli, TrainOptions* o) {
  cmd->add_option("--lr-schedule", cli->lr_schedule,
                  "constant | cosine | linear: after the warm-up, keep --lr, or decay it to "
                  "--min-lr along a half cosine or a line by the last step")
      ->capture_default_str();
  cmd->add_option("--warmup-steps", o->lr_schedule.warmup_steps,
                  "Raise the rate linearly over the first W steps: step t (0-based) trains at "
                  "lr*(t+1)/W")
      ->capture_default_str();
  cmd->add_option("--min-lr", o->lr_schedule.min_lr,
                  "The rate cosine and linear decay to (at most --lr)")
      ->capture_default_str();
  cli->clip_grad_norm =
      cmd->add_option("--clip-grad-norm", o->clip_grad_norm,
                      "Scale all gradients by min(1, X/(norm+1e-6)), norm over every stage as "
                      "torch.nn.utils.clip_grad_norm_ on one device; reported per step (inf: "
                      "report only)");
  cmd->add_option("--adam-betas", cli->adam_betas,
                  "Adam and AdamW: B1,B2 (default 0.9,0.999; GPT recipes use 0.9,0.95)");
  cli->adam_eps =
      cmd->add_option("--adam-eps", o->optimizer.eps, "Adam and AdamW: epsilon (default 1e-8)");
  cmd->add_flag("--no-decay-on-norm-and-bias", o->optimizer.no_decay_on_norm_and_bias,
                "Weight decay only on parameters of 2 or more dimensions (none on biases and "
                "normalisation weights), as nanoGPT and Megatron");
}

namespace {

// "B1,B2" with each in [0, 1), else InputError.
void ParseBetas(const std::string& text, OptimizerOptions& o) {
  double b1 = 0, b2 = 0;
  char end = 0;
  if (std::sscanf(text.c_str(), "%lf,%lf%c", &b1, &b2, &end) != 2)
    ThrowInput("--adam-betas {}: expected two numbers B1,B2 such as 0.9,0.95", text);
  for (double b : {b1, b2})
    if (!(b >= 0 && b < 1)) ThrowInput("--adam-betas {}: each must be in [0, 1)", text);
  o.beta1 = b1;
  o.beta2 = b2;
}

}  // namespace

void FinishRecipe(const RecipeCli& cli, TrainOptions& o) {
  o.lr_schedule.kind = ParseLrScheduleKind(cli.lr_schedule);
  if (auto why = LrScheduleError(o.lr_schedule, o.optimizer.lr, o.steps)) ThrowInput("{}", *why);
  if (cli.clip_grad_norm->count() > 0 && !(o.clip_grad_norm > 0)) {
    ThrowInput("--clip-grad-norm {}: must be positive (inf reports the norm without clipping)",
               o.clip_grad_norm);
  }
  const bool adam = o.optimizer.kind != OptimizerKind::kSgd;
  if (!cli.adam_betas.empty() || cli.adam_eps->count() > 0) {
    if (!adam)
      ThrowInput("--adam-betas and --adam-eps: only with --optimizer adam or adamw, not {}",
                 ToString(o.optimizer.kind));
  }
  if (!cli.adam_betas.empty()) ParseBetas(cli.adam_betas, o.optimizer);
  if (!(o.optimizer.eps > 0 && std::isfinite(o.optimizer.eps)))
    ThrowInput("--adam-eps {}: must be positive", o.optimizer.eps);
}

}  // namespace dapple
