// Checkpoints saved while training goes on: a step stalls only while its rank
// copies its tensors to host memory; a background thread writes, confirms and commits.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "dapple/runtime/checkpoint/checkpoint.h"
#include "dapple/runtime/comm/communicator.h"

namespace dapple {

// Note [Asynchronous checkpoints]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// At a checkpoint step every rank that writes layers (replica 0 of each stage) copies their
// parameters, optimizer state and buffers to host memory (SnapshotLayer; the step stalls for
// that copy only) and hands the copies to a writer thread, which pickles and writes each
// file atomically and durably, reads it back for its CRC-32 (Note [Checkpoint checksums]),
// and confirms through the rendezvous store (Note [Checkpoint commit]); on rank 0 the
// writer then waits for every rank's confirmation, checks them, writes meta.json and moves
// `latest`, all as a synchronous save does and with the same bytes. The writer uses the store
// only, never a collective of the process groups, so it cannot interleave with the training
// thread's transfers and allreduces (the store serialises its operations). Every rank,
// writing or not, sends its confirmation, so rank 0 never waits for an idle rank's step.
//
// At most one save is in flight: a save first waits for the previous one (a rank that
// checkpoints every step whose write is slower than a step waits for it), and the end of
// training waits for the last, so a run that exits cleanly has committed its final
// checkpoint. A rank killed while its writer runs never confirms, so rank 0 does not commit
// and `latest` keeps naming the previous checkpoint; the other ranks notice the death at
// their next transfer, as without checkpoints. A failure of the writer (a full disk, a
// confirmation that never came) is rethrown by the training thread at the next save or at
// the end. When the training thread fails, a save in flight gets 2 s to finish (a save
// whose files were all confirmed is then still committed) and is abandoned after that.
//
// Memory: one extra copy of the rank's stage state while a save in the middle of a run is in
// flight (`--checkpoint-every`). The final checkpoint shares the tensors instead
// (SnapshotValues::kShared): nothing changes them before the end of training waits for its
// writer. Files are written record by record, never whole in memory. `--sync-checkpoints`
// writes in the training thread instead, sharing the tensors (the step then stalls for the
// whole save).
struct CheckpointJob {
  std::filesystem::path dir;
  int64_t step = 0;
  std::vector<LayerSnapshot> layers;  // what this rank writes (empty: nothing)
  // Rank 0: the checkpoint's meta.json without `files` (filled from the confirmations);
  // nullopt on the other ranks.
  std::optional<CheckpointMeta> meta;
  int keep_checkpoints = 0;            // PruneCheckpoints after the commit
  bool die_after_first_layer = false;  // test hook (DAPPLE_TEST_DIE_IN_SAVE)
};

// Runs CheckpointJobs, in a background thread (async) or in the caller's.
// Thread-compatible: one training thread calls it.
class CheckpointWriter {
 public:
  // `comm` must outlive this object (or be leaked, Note [Leak on failure]).
  CheckpointWriter(Communicator& comm, bool async) : comm_(comm), async_(async) {}
  // Waits for a save in flight. While an exception unwinds the training thread it waits at
  // most kFinishOnFailure, then abandons the save (the thread is detached and ends with the
  // process).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Waits for the save in flight (if any) and rethrows its failure.
  void Wait();
  // Starts `job` (REQUIRES: Wait was called since the last Start); runs it to the end
  // before returning when not async.
  void Start(CheckpointJob job);

 private:
  void Run(const CheckpointJob& job);

  // How long a failing training thread lets a save in flight finish (its destructor).
  static constexpr std::chrono::seconds kFinishOnFailure{2};

  Communicator& comm_;
  bool async_;
  std::shared_ptr<std::atomic<bool>> done_;  // set by the thread as its last act
  std::thread thread_;
  std::exception_ptr error_;  // the background save's failure, set before the thread ends
};

}  // namespace dapple
