// The communicator's transports (Note [Transport by device], transport.h): the choice at
// construction, the NCCL groups beside the Gloo ones, and which of them carries a tensor.
// The NCCL half has not run on a GPU.
#include <fmt/format.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "dapple/common/error.h"
#include "dapple/runtime/comm/communicator.h"
#include "dapple/runtime/comm/nccl_backend.h"

namespace dapple {

// Every rank publishes its place; every rank reads them all (world_size store reads), so that
// every rank makes the same choice.
void Communicator::ChooseTransport() {
  std::vector<std::string> places{PlaceOf(device_)};
  if (env_.world_size > 1) {
    const Deadline started(timeout_);  // Note [One deadline per wait chain]
    auto key = [](int r) { return fmt::format("place/{}", r); };
    const std::string mine = places[0];
    places.clear();
    try {
      store_->set(key(env_.rank), std::vector<uint8_t>(mine.begin(), mine.end()));
      for (int r = 0; r < env_.world_size; ++r) {
        store_->wait({key(r)}, started.Left());
        auto bytes = store_->get(key(r));
        places.emplace_back(bytes.begin(), bytes.end());
      }
    } catch (const std::exception& e) {
      std::string_view what = e.what();
      throw CommError(fmt::format("rank {}: gathering the ranks' devices failed: {}", env_.rank,
                                  what.substr(0, what.find('\n'))));
    }
  }
  transport_ = dapple::ChooseTransport(device_, places);
  if (transport_ == Transport::kNccl) AddNcclGroups("", env_.rank, env_.world_size);
}

// c10d creates NCCL communicators on first use, so unused groups cost nothing.
void Communicator::AddNcclGroups(const std::string& name, int member, int size) {
  auto store = c10::make_intrusive<c10d::PrefixStore>("nccl/" + name, store_);
  auto make = [&](const char* lane) {
    return MakeNcclBackend(c10::make_intrusive<c10d::PrefixStore>(lane, store), member, size,
                           timeout_);
  };
  nccl_[name] = NcclGroups{make("collectives"), make("up"), make("down")};
}

bool Communicator::Stages(const torch::Tensor& t) const {
  return transport_ == Transport::kStaged && (t.is_cuda() || device_.is_cpu());
}

c10d::Backend& Communicator::BackendFor(const torch::Tensor& t, const std::string& name, Lane lane,
                                        int member) const {
  if (transport_ != Transport::kNccl || !t.is_cuda()) return Group(name);
  auto it = nccl_.find(name);
  DAPPLE_CHECK(it != nccl_.end(), "no NCCL group " + name);
  const int me = members_.at(name);
  switch (lane) {
    case Lane::kCollective:
      return *it->second.collectives;
    case Lane::kSend:  // this rank sends: up when it is the lower member
      return me < member ? *it->second.up : *it->second.down;
    case Lane::kRecv:  // the peer sends: up when the peer is the lower member
      return member < me ? *it->second.up : *it->second.down;
  }
  return Group(name);
}

}  // namespace dapple
