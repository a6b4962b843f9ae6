// `dapple train --elastic`: plans the job again with the DAPPLE planner for the
// devices it has, when some are excluded (--exclude-devices), when one is lost (a rank that
// fails twice in a row, the Replanner of Note [Restarts]), or when an outer launcher starts
// fewer processes than the plan needs (a node that did not come back).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dapple/format/cluster.h"
#include "dapple/format/plan.h"
#include "dapple/format/profile.h"
#include "dapple/runtime/launch/restarts.h"

namespace dapple {

struct ElasticInputs {
  std::string profile;                // --profile: the model's profile (any format `plan` reads)
  std::string cluster;                // --cluster: preset name or file, as for `dapple plan`
  std::filesystem::path plan_folder;  // where the new plans go (the checkpoint folder)
  // Whether new plans may interleave chunks: not for a model that ties parameters, which
  // `dapple train` does not run with chunks.
  bool interleave = true;
};

// `inputs` with an empty profile or cluster taken from what `plan` records (Plan::profile,
// Plan::cluster: `dapple plan` writes them). Throws InputError, one line naming the plan
// file `plan_path`, when either is still missing.
ElasticInputs WithPlanRecord(ElasticInputs inputs, const Plan& plan,
                             const std::filesystem::path& plan_path);

// The planner of --elastic: the profile and cluster loaded once.
class ElasticPlanner {
 public:
  // Reads the profile and the cluster (InputError naming the flag, or the plan that recorded
  // it, when they do not load, when the profile's layer ids are not `model_layers`, or when
  // the cluster has fewer than `devices_needed` devices), so that bad input stops the job
  // before it starts.
  ElasticPlanner(const ElasticInputs& in, const std::vector<std::string>& model_layers,
                 int devices_needed);

  int num_devices() const { return cluster_.num_devices(); }

  struct Result {
    Plan plan;
    std::filesystem::path path;  // plan_folder/elastic-plan-<devices>.json
  };
  // Plans `global_batch` on the cluster's devices `devices` (ascending indexes; process k of
  // the new job runs on devices[k]). With `record`, writes the plan (with the profile and
  // cluster) to its path and prints one line on stderr naming `why`, the plan's shape and
  // the path. Throws InputError (one line, exit code 2) when `devices` is empty ("no devices
  // left") or no plan fits them. The planner refines as `dapple plan` does; its budget is
  // counted in work, so the plan depends on its inputs only (Note [A budget of work] in
  // plan/refine/refine.cc).
  Result PlanOn(const std::vector<int>& devices, int global_batch, const std::string& why,
                bool record) const;

 private:
  ElasticInputs in_;
  Profile profile_;
  Cluster cluster_;
};

// Parses --exclude-devices ("2", "1,3"): device indexes below `devices`, each once; throws
// InputError naming the flag otherwise.
std::vector<int> ParseDeviceList(const std::string& text, int devices);

// --exclude-devices: before the job starts, plans it for the first o.nproc_per_node devices
// of the cluster without `excluded`, and rewrites `o` for that plan (its processes, --plan in
// the ranks' argv). Returns the devices the new job runs on, process by process.
std::vector<int> ExcludeDevices(const ElasticPlanner& planner, const std::vector<int>& excluded,
                                LaunchOptions& o);

// The Replanner of Note [Restarts] for a job whose process k runs on the cluster's device
// `in_use[k]`: when rank r is lost, plans again on in_use without in_use[r].
Replanner MakeElasticReplanner(std::shared_ptr<const ElasticPlanner> planner,
                               std::vector<int> in_use);

// Note [Fewer processes than the plan]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An outer launcher (a Slurm requeue, a retry loop, mpirun) may restart a job of several
// nodes without one that did not come back: the job then has fewer processes than its plan
// uses. Without --elastic that is bad input (one line, exit code 2). With --elastic every
// process that finds the shortfall (each node's `--nproc` launcher, to check before it
// starts anything, and each rank) plans the same global batch for the cluster's first W
// devices (W: the processes present) with the planner, whose search depends on its inputs
// only (its refinement's budget is counted in work, not time), so all of them choose the
// same plan without talking to each other; rank 0 writes it to
// D/elastic-plan-<W>.json and prints the line, and every rank trains under the plan it made
// in memory, so no rank depends on seeing another's file. With `--resume auto` the job
// continues from the newest checkpoint, which loads under any plan. When the node comes
// back, the same command finds the processes the plan needs and runs under it again.
//
// A job started with `world` processes, fewer than `plan` (read from `plan_path`) needs (an
// outer launcher's restart without a node that did not come back): plans the same global
// batch for the cluster's first `world` devices (Note [Fewer processes than the plan]).
// `record`: write the plan file and print the line (rank 0 only).
ElasticPlanner::Result PlanForProcesses(const ElasticPlanner& planner, int world, const Plan& plan,
                                        const std::string& plan_path, bool record);

// The value of --plan in a rank's argv ("--plan P" or "--plan=P"); `replace` swaps it.
std::string PlanArgument(std::vector<std::string>& argv, const std::string* replace);

}  // namespace dapple
