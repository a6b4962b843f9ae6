// `dapple train --max-restarts N`: the local launcher starts every rank again after a
// failure, and the ranks resume from the newest complete checkpoint (Note [Restarts]).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dapple/runtime/launch/launcher.h"

namespace dapple {

// Note [Restarts]
// ~~~~~~~~~~~~~~~
// A job of one node restarts as a whole: the launcher stops every rank after the first failure
// (as without restarts), then starts all of them again with `--resume auto`, so that they load
// the newest checkpoint whose every layer file was committed (checkpoints are atomic: a save
// killed half-way leaves the previous `latest`). Under the same plan the continuation is
// bit-identical to a run without the failure (same data order by step, same optimizer state).
// Not restarted: bad input (exit code 2, it fails the same way again), a job the user stopped
// (SIGINT/SIGTERM to the launcher), and a failure once N restarts are spent. When the run wrote
// no checkpoint yet, the restart starts from step 0 as the user's command did (an older run's
// checkpoint in the folder is not this run's state). Each restart is one line on stderr: the
// rank that failed and how, the step resumed from, and how many completed steps are replayed
// (rank 0 reports its completed steps through DAPPLE_PROGRESS_FILE, set by the launcher when
// it may restart).
// With --elastic a rank that fails twice in a row counts as a lost device: the job is planned
// again for the others (Replanner) and resumes under the new plan.
// Jobs of several nodes are not restarted by dapple: every node's launcher would have to agree
// on the restart; there `--resume auto` under the outer launcher's own restart does the same
// (and with --elastic also goes on with fewer nodes: Note [Fewer processes than the plan] in
// tools/dapple/torch/elastic.h).

// `--elastic`: after device `lost` (a rank of the job `options` runs) failed twice in a row,
// plans the job again for the devices left and rewrites `options` for it (fewer processes,
// the new plan in argv); returns false or throws InputError (no device left, no plan fits)
// to stop the job.
using Replanner = std::function<bool(int lost, LaunchOptions& options)>;

struct RestartPolicy {
  int max_restarts = 0;
  std::filesystem::path checkpoint_dir;  // required when max_restarts > 0
  bool user_resumes = false;             // the command already says --resume or --resume auto
  int world_size = 1;                    // for the failure line ("rank r of W")
  Replanner replan;                      // --elastic; empty: the devices never change
};

// Runs LaunchLocal(options) and restarts it as Note [Restarts] says. Returns 0 when an
// attempt succeeded, else the first failing process's code of the last attempt. Prints the
// failure line of each attempt and the restart line of each restart to stderr.
int LaunchWithRestarts(LaunchOptions options, const RestartPolicy& policy);

// `argv` without any --resume option (and its "auto" value), then with `--resume auto`.
std::vector<std::string> WithResumeAuto(const std::vector<std::string>& argv);

// For the ranks: records that `completed` steps are done, in $DAPPLE_PROGRESS_FILE when the
// launcher set it (else nothing). Cheap: one pwrite of 21 bytes into a file kept open (Note
// [Progress without a file system round trip] in restarts.cc).
void ReportCompletedSteps(int64_t completed);

// The attempt number of this rank's job: $DAPPLE_RESTART (0 for the first start or when unset).
int RestartAttempt();

}  // namespace dapple
