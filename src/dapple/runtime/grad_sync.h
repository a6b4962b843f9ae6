// Gradient synchronisation among the replicas of one stage: the accumulated gradients are
// flattened into buckets of at most `bucket_bytes` (per dtype, in parameter order), summed
// by one allreduce per bucket in the stage's process group, and copied back.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dapple/runtime/communicator.h"

namespace dapple {

inline constexpr int64_t kDefaultBucketBytes = 25 << 20;

// Sums the gradients of `params` over group `group` (every member calls it with its
// parameters in the same order and shapes). A parameter without a gradient contributes
// zeros and gets one. Returns the bytes reduced. `what` prefixes a failure.
int64_t AllReduceGradients(Communicator& comm, const std::string& group,
                           const std::vector<torch::Tensor>& params, int64_t bucket_bytes,
                           const std::string& what);

}  // namespace dapple
