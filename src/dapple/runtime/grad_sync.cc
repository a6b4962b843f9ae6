// Bucketed gradient allreduce.
#include "dapple/runtime/grad_sync.h"

#include <fmt/format.h>

#include <map>

namespace dapple {
namespace {

void ReduceBucket(Communicator& comm, const std::string& group, std::vector<torch::Tensor>& grads,
                  const std::string& what) {
  if (grads.empty()) return;
  std::vector<torch::Tensor> flat;
  for (const auto& g : grads) flat.push_back(g.reshape({-1}));
  torch::Tensor bucket = torch::cat(flat);
  comm.AllReduceSum(bucket, group, what);
  int64_t offset = 0;
  for (auto& g : grads) {
    int64_t n = g.numel();
    g.copy_(bucket.narrow(0, offset, n).view_as(g));
    offset += n;
  }
  grads.clear();
}

}  // namespace

int64_t AllReduceGradients(Communicator& comm, const std::string& group,
                           const std::vector<torch::Tensor>& params, int64_t bucket_bytes,
                           const std::string& what) {
  // One open bucket per dtype, so a mixed-precision stage never casts a gradient.
  std::map<c10::ScalarType, std::pair<std::vector<torch::Tensor>, int64_t>> open;
  int64_t total = 0, index = 0;
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    torch::Tensor g = p.mutable_grad();
    if (!g.defined()) {
      p.mutable_grad() = torch::zeros_like(p);
      g = p.mutable_grad();
    }
    auto& [grads, bytes] = open[g.scalar_type()];
    int64_t nbytes = g.numel() * static_cast<int64_t>(g.element_size());
    if (!grads.empty() && bytes + nbytes > bucket_bytes) {
      ReduceBucket(comm, group, grads, fmt::format("{} (bucket {})", what, index++));
      bytes = 0;
    }
    grads.push_back(g);
    bytes += nbytes;
    total += nbytes;
  }
  for (auto& [dtype, bucket] : open) {
    ReduceBucket(comm, group, bucket.first, fmt::format("{} (bucket {})", what, index++));
  }
  return total;
}

}  // namespace dapple
