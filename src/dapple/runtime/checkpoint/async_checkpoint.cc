// The checkpoint writer of Note [Asynchronous checkpoints].
#include "dapple/runtime/checkpoint/async_checkpoint.h"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <utility>

#include "dapple/common/error.h"
#include "dapple/runtime/checkpoint/checkpoint_commit.h"
#include "dapple/runtime/checkpoint/checkpoint_sums.h"

namespace dapple {

CheckpointWriter::~CheckpointWriter() {
  if (!thread_.joinable()) return;
  if (std::uncaught_exceptions() > 0) {
    // Training failed: a save whose every file was confirmed is still committed if the
    // writer gets there within kFinishOnFailure; else it is abandoned (the process is about
    // to exit, Note [Leak on failure]).
    const auto until = std::chrono::steady_clock::now() + kFinishOnFailure;
    while (!done_->load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (done_->load()) {
      thread_.join();
    } else {
      thread_.detach();
    }
    return;
  }
  thread_.join();  // a failure of it is lost here: Wait reports failures
}

void CheckpointWriter::Wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void CheckpointWriter::Start(CheckpointJob job) {
  DAPPLE_CHECK(!thread_.joinable() && !error_);
  if (!async_) {
    Run(job);
    return;
  }
  done_ = std::make_shared<std::atomic<bool>>(false);
  thread_ = std::thread([this, done = done_, job = std::move(job)] {
    try {
      Run(job);
    } catch (...) {
      error_ = std::current_exception();  // read by Wait after the join
    }
    done->store(true);
  });
}

void CheckpointWriter::Run(const CheckpointJob& job) {
  std::vector<WrittenLayer> written;
  for (const LayerSnapshot& layer : job.layers) {
    WriteLayerSnapshot(job.dir, job.step, layer);
    // Note [Checkpoint checksums]: the file as it is on the disk now.
    LayerFileSum sum = SumOfFile(LayerFile(CheckpointStepDir(job.dir, job.step), layer.layer));
    written.push_back({layer.layer, sum.bytes, sum.crc32});
    if (job.die_after_first_layer) std::raise(SIGKILL);  // test hook: killed mid-save
  }
  // Note [Checkpoint commit]: every writer confirms its files; rank 0 checks, then commits.
  auto reports = comm_.GatherStrings(fmt::format("checkpoint/{}", job.step),
                                     DescribeWrittenLayers(written), 0);
  if (!job.meta) return;
  CheckpointMeta meta = *job.meta;
  meta.files = VerifyWrittenLayers(CheckpointStepDir(job.dir, job.step), meta.layers, reports);
  CommitCheckpoint(job.dir, meta);
  PruneCheckpoints(job.dir, job.keep_checkpoints);
}

}  // namespace dapple
