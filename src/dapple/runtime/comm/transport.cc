// Note [Transport by device]: see transport.h.
#include "dapple/runtime/comm/transport.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "dapple/common/error.h"

namespace dapple {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

}  // namespace

const char* TransportName(Transport t) {
  switch (t) {
    case Transport::kGloo:
      return "gloo";
    case Transport::kStaged:
      return "gloo staged through host copies";
    case Transport::kNccl:
      return "nccl";
  }
  return "?";
}

std::string PlaceOf(const torch::Device& device) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(host) + "/" + device.str();
}

Transport ChooseTransport(const torch::Device& mine, const std::vector<std::string>& places) {
  if (!mine.is_cuda()) {
    return EnvOr("DAPPLE_TEST_STAGE_THROUGH_HOST", "0") == "1" ? Transport::kStaged
                                                               : Transport::kGloo;
  }
  const std::string forced = EnvOr("DAPPLE_CUDA_TRANSPORT", "");
  if (!forced.empty() && forced != "staged" && forced != "nccl")
    ThrowInput("environment variable DAPPLE_CUDA_TRANSPORT={}: expected staged or nccl", forced);
  if (forced == "staged") return Transport::kStaged;
  const bool all_cuda = std::all_of(places.begin(), places.end(), [](const std::string& p) {
    return p.find("/cuda:") != std::string::npos;
  });
  const bool distinct = std::set<std::string>(places.begin(), places.end()).size() == places.size();
  if (all_cuda && distinct) return Transport::kNccl;
  if (forced == "nccl")
    ThrowInput(
        "DAPPLE_CUDA_TRANSPORT=nccl: NCCL needs a GPU of its own for every rank, and {} "
        "ranks share {} places",
        places.size(), std::set<std::string>(places.begin(), places.end()).size());
  return Transport::kStaged;
}

torch::Tensor HostCopy(const torch::Tensor& t) {
  return t.is_cuda() ? t.to(torch::kCPU) : t.clone();
}

}  // namespace dapple
