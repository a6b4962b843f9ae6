// `dapple train --elastic` (issue 17): the Replanner of Note [Restarts] that plans the job
// again with the DAPPLE planner for the devices left after one is lost.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "dapple/runtime/restarts.h"

namespace dapple {

struct ElasticInputs {
  std::string profile;                // --profile: the model's profile (any format `plan` reads)
  std::string cluster;                // --cluster: preset name or file, as for `dapple plan`
  std::filesystem::path plan_folder;  // where the new plans go (the checkpoint folder)
};

// Reads the profile and the cluster now (InputError naming the flag when they do not load, or
// when the profile's layer ids are not `model_layers`), so that a bad flag stops the job
// before it starts. The Replanner takes the cluster's first
// W devices (W: the job's processes), drops the lost one, plans the global batch of the
// job's current plan (--plan in the ranks' argv) onto the rest, writes the plan to
// plan_folder/elastic-plan-<W-1>.json, prints one line, and points the ranks at it; with no
// device left or no plan that fits it throws InputError (one line, exit code 2).
Replanner MakeElasticReplanner(const ElasticInputs& in, int world_size,
                               const std::vector<std::string>& model_layers);

}  // namespace dapple
