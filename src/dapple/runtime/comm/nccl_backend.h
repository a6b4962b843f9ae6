// NCCL through c10d (ProcessGroupNCCL from the torch wheel): the backend the runtime will use
// for CUDA devices (docs/design.md section 7). Built and linked in every build, CPU-only
// machines included; no training path uses it yet, and it has not run on a GPU.
#pragma once

#include <chrono>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace dapple {

// A ProcessGroupNCCL of `size` ranks meeting in `store`, this process being `rank`, on the
// current CUDA device. Throws InputError naming the rank when this machine has no CUDA device
// (c10d refuses then) or NCCL cannot start.
c10::intrusive_ptr<c10d::Backend> MakeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout);

}  // namespace dapple
