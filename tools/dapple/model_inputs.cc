#include "model_inputs.h"

#include <cstdio>

#include "dapple/common/error.h"
#include "dapple/format/local_cluster.h"
#include "dapple/format/settings.h"

namespace dapple {

void AddModelInputOptions(CLI::App* cmd, ModelInputArgs& args) {
  cmd->add_option("--profile", args.profile, "Profile: dapple-profile/1 JSON or PipeDream text")
      ->required();
  cmd->add_option("--pbs", args.pbs, "Profile batch size (default: -pbs-N in the file name)");
  cmd->add_option("--cluster", args.cluster,
                  "Cluster preset (paper-a, paper-b, paper-c, local) or cluster JSON")
      ->required();
  cmd->add_option("--memory-gb", args.memory_gb, "Device memory in GB (overrides the cluster)");
  cmd->add_option("--bucket-mb", args.bucket_mb,
                  "Allreduce bucket size in MiB of parameters when overlapped (default 25, as "
                  "`dapple train`)");
  cmd->add_option("--weight-grad-share", args.weight_grad_share,
                  "For zb-h1 on profiles without backward_input_ms/backward_weight_ms: the "
                  "share of a layer's backward that is its weight gradient (default 0.5)");
}

namespace {

// LoadCluster, its errors naming the flag: a bad cluster file's own errors already name
// the file and field.
Cluster LoadClusterFlag(const std::string& value) {
  try {
    return LoadCluster(value);
  } catch (const InputError& e) {
    ThrowInput("--cluster: {}", e.what());
  }
}

// Note [State per parameter]: at its peak a stage holds, per parameter byte, its weights, its
// gradients, the optimizer's state (SGD with momentum one buffer, without momentum none, Adam
// and AdamW two moments) and one more for the step's scratch: the backward computes each
// layer's weight gradient into a fresh tensor before adding it to the accumulated one, and
// the update makes temporaries of a parameter's size, and malloc keeps what they freed for
// reuse within the step (Note [Freed memory stays] in common/malloc_tuning.h), so at the
// step's peak they take about one more copy of the parameters (docs/cost-model.md, "State
// per parameter": measured per rank on MLPs of width 1024 and 2048). The profile names the
// optimizer whose update it timed (`dapple profile --optimizer`), the one its plans train
// with (`dapple train` warns otherwise); a profile that names none (PipeDream and DAPPLE
// text) keeps 4, the weights, gradients and Adam moments of the paper's memory model.
double StateFactorOf(const Profile& p) {
  const std::string optimizer = p.settings ? p.settings->optimizer : "";
  if (optimizer.empty()) return CostOptions{}.state_factor;
  constexpr double kWeightsGradientsScratch = 3;
  if (optimizer != "sgd") return kWeightsGradientsScratch + 2;  // two moments
  auto options = p.metadata.find("optimizer_options");
  const bool no_momentum =
      options != p.metadata.end() && options->second.find("momentum 0,") != std::string::npos;
  return kWeightsGradientsScratch + (no_momentum ? 0 : 1);
}

}  // namespace

ModelInputs LoadModelInputs(const ModelInputArgs& a) {
  // Checked here rather than by CLI11, whose messages take two lines and print the range.
  if (a.pbs && *a.pbs <= 0) ThrowInput("--pbs: must be positive, got {}", *a.pbs);
  if (a.memory_gb && !(*a.memory_gb > 0))
    ThrowInput("--memory-gb: must be positive, got {}", *a.memory_gb);
  if (a.bucket_mb && !(*a.bucket_mb > 0))
    ThrowInput("--bucket-mb: must be positive, got {}", *a.bucket_mb);
  if (a.weight_grad_share && !(*a.weight_grad_share >= 0 && *a.weight_grad_share <= 1))
    ThrowInput("--weight-grad-share: must be in [0, 1], got {}", *a.weight_grad_share);
  ModelInputs in{LoadProfile(a.profile, a.pbs), Cluster{}, {}};
  if (a.cluster == "local") {
    LocalCluster local = LoadLocalCluster();
    // The guess, or a calibration taken on a busy machine: say so (one line).
    if (!local.calibrated || local.busy)
      std::fprintf(stderr, "dapple: note: %s\n", local.note.c_str());
    in.cluster = std::move(local.cluster);
  } else {
    in.cluster = LoadClusterFlag(a.cluster);
  }
  if (in.cluster.num_devices() < 1)
    ThrowInput("--cluster {}: the cluster has no device", a.cluster);
  if (auto mismatch = SettingsMismatch(in.profile, in.cluster))
    std::fprintf(stderr, "dapple: warning: %s\n", mismatch->c_str());
  in.cost_options.state_factor = StateFactorOf(in.profile);
  if (a.memory_gb) in.cost_options.memory_bytes_override = *a.memory_gb * 1e9;
  if (a.bucket_mb) in.cost_options.allreduce_bucket_bytes = *a.bucket_mb * (1 << 20);
  if (a.weight_grad_share) in.cost_options.weight_grad_share = *a.weight_grad_share;
  return in;
}

}  // namespace dapple
