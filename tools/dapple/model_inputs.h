// The inputs `plan` and `simulate` share: a profile (with its batch size), a cluster, an
// optional device-memory override and the allreduce bucket size. One place declares their flags,
// checks them and loads them.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "dapple/cost/analytic_cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/profile.h"

namespace dapple {

struct ModelInputArgs {
  std::string profile;
  std::optional<int> pbs;
  std::string cluster;
  std::optional<double> memory_gb;
  std::optional<double> bucket_mb;
  std::optional<double> weight_grad_share;
};

// Adds --profile, --pbs, --cluster (required where marked), --memory-gb, --bucket-mb and
// --weight-grad-share.
void AddModelInputOptions(CLI::App* cmd, ModelInputArgs& args);

struct ModelInputs {
  Profile profile;
  Cluster cluster;
  CostOptions cost_options;  // memory override and bucket size applied
};

// Checks the flags (one InputError line each: --pbs, --memory-gb, --bucket-mb must be positive; a
// cluster without devices) and loads the profile and cluster. On stderr, one line each: that
// `local` is the guess and why (no current calibration of this machine), and that the profile
// was measured unlike the cluster's devices compute (SettingsMismatch).
ModelInputs LoadModelInputs(const ModelInputArgs& args);

}  // namespace dapple
