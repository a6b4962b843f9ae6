// Communicator over c10d's TCPStore and ProcessGroupGloo.
#include "dapple/runtime/comm/communicator.h"

#include <c10/util/Logging.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>

#include "dapple/common/clock.h"
#include "dapple/common/error.h"
#include "dapple/runtime/comm/cuda_module.h"

// Note [Gloo's headers]: ProcessGroupGloo.hpp includes Gloo's headers, which the torch wheel
// does not ship; Debian's libgloo-dev provides them (another Gloo revision than the one linked
// into libtorch_cpu). That is sound here because this file uses Gloo's types only as opaque
// pointers (std::shared_ptr<gloo::transport::Device>) handed from one libtorch function to
// another, and ProcessGroupGloo and its Options hold Gloo's types only through pointers, so
// their layout does not depend on Gloo's. Nothing of Gloo's is instantiated or called here,
// and Debian's libgloo is never linked. Anything beyond that (a Gloo algorithm, a Gloo
// context) must not be used from dapple's code.

namespace dapple {
namespace {

int EnvInt(const char* name, int fallback, int min) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < min || x > (1L << 30)) {
    ThrowInput("environment variable {}={}: expected an integer >= {}", name, v, min);
  }
  return static_cast<int>(x);
}

// First line of an exception message (gloo and c10 append long context lines).
std::string FirstLine(const std::exception& e) {
  std::string_view s = e.what();
  auto nl = s.find('\n');
  return std::string(s.substr(0, nl));
}

// The gloo transport device: an explicit interface (GLOO_SOCKET_IFNAME, as PyTorch), the
// loopback for a local job, else this host's address.
std::shared_ptr<::gloo::transport::Device> GlooDevice(const DistEnv& env) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  const std::string& a = env.master_addr;
  if (a == "localhost" || a.rfind("127.", 0) == 0) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

c10::intrusive_ptr<c10d::Backend> MakeGlooGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                const DistEnv& env, int rank, int size,
                                                std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(GlooDevice(env));
  options->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace

DistEnv DistEnv::FromEnvironment() {
  DistEnv e;
  e.world_size = EnvInt("WORLD_SIZE", 1, 1);
  e.rank = EnvInt("RANK", 0, 0);
  e.local_rank = EnvInt("LOCAL_RANK", e.rank, 0);
  e.master_port = EnvInt("MASTER_PORT", 29500, 1);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
  if (const char* f = std::getenv("DAPPLE_RENDEZVOUS_FILE"); f && *f) e.rendezvous_file = f;
  if (e.rank >= e.world_size) {
    ThrowInput("environment: RANK={} is not below WORLD_SIZE={}", e.rank, e.world_size);
  }
  if (e.master_port > 65535) ThrowInput("environment: MASTER_PORT={} is not a port", e.master_port);
  return e;
}

CommWork::CommWork(c10::intrusive_ptr<c10d::Work> work, std::vector<torch::Tensor> tensors,
                   std::string what)
    : work_(std::move(work)), tensors_(std::move(tensors)), what_(std::move(what)) {}

CommWork::CommWork(MessagesToSelf& box, uint32_t tag, torch::Tensor buffer, std::string what)
    : tensors_{std::move(buffer)}, what_(std::move(what)), from_self_(&box), from_tag_(tag) {}

bool CommWork::Done() const {
  if (from_self_) return from_self_->count(from_tag_) > 0;
  return !work_.defined() || work_->isCompleted();
}

void CommWork::RecordCompletion() {
  if (!work_.defined() || completed_ms_) return;
  completed_ms_ = std::make_shared<std::atomic<double>>(-1.0);
  work_->getFuture()->addCallback(
      [done = completed_ms_](c10::ivalue::Future&) { done->store(NowMs()); });
}

std::chrono::milliseconds Deadline::Left() const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      start_ + timeout_ - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

double Deadline::ElapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void CommWork::Wait(const Deadline& deadline) {
  if (from_self_) {
    auto it = from_self_->find(from_tag_);
    if (it == from_self_->end())
      throw Error(fmt::format("{}: waits for a message to itself that was not sent before", what_));
    tensors_.at(0).copy_(it->second);
    from_self_->erase(it);
    from_self_ = nullptr;
    return;
  }
  if (!work_.defined()) return;
  try {
    work_->wait(deadline.Left());
  } catch (const std::exception& e) {
    throw CommError(fmt::format("{}: failed or timed out after {:.1f} s (timeout {:.1f} s): {}",
                                what_, deadline.ElapsedSeconds(),
                                deadline.timeout().count() / 1000.0, FirstLine(e)));
  }
  if (finish_) std::exchange(finish_, nullptr)();
}

Communicator::Communicator(const DistEnv& env, std::chrono::milliseconds timeout,
                           torch::Device device)
    : env_(env), timeout_(timeout), device_(device) {
  store_ = MakeStore(env, timeout);
  try {
    groups_[""] = MakeGlooGroup(c10::make_intrusive<c10d::PrefixStore>("world", store_), env,
                                env.rank, env.world_size, timeout);
  } catch (const std::exception& e) {
    throw CommError(fmt::format("rank {}: cannot form the process group of {} ranks: {}", env.rank,
                                env.world_size, FirstLine(e)));
  }
  members_[""] = env.rank;
  ChooseTransport();
}

// Note [Rendezvous exposure].
c10::intrusive_ptr<c10d::Store> Communicator::MakeStore(const DistEnv& env,
                                                        std::chrono::milliseconds timeout) {
  if (env.world_size == 1) return c10::make_intrusive<c10d::HashStore>();
  if (!env.rendezvous_file.empty()) {
    try {
      auto store = c10::make_intrusive<c10d::FileStore>(env.rendezvous_file, env.world_size);
      store->setTimeout(timeout);
      return store;
    } catch (const std::exception& e) {
      ThrowInput("rank {}: cannot open the rendezvous file {} (DAPPLE_RENDEZVOUS_FILE): {}",
                 env.rank, env.rendezvous_file, FirstLine(e));
    }
  }
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(env.master_port);
  opts.isServer = env.rank == 0;
  opts.numWorkers = env.world_size;
  opts.waitWorkers = true;
  opts.timeout = timeout;
  // c10d logs every failed connection attempt (c10's logging: the wheel is built without
  // glog); the failure is reported once, below, as one line.
  const int saved_level = FLAGS_caffe2_log_level;
  FLAGS_caffe2_log_level = c10::GLOG_FATAL;
  try {
    auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
    FLAGS_caffe2_log_level = saved_level;
    return store;
  } catch (const std::exception& e) {
    FLAGS_caffe2_log_level = saved_level;
    ThrowInput(
        "rank {}: cannot reach the rendezvous at {}:{} (MASTER_ADDR:MASTER_PORT) within "
        "{:.1f} s: {}",
        env.rank, env.master_addr, env.master_port, timeout.count() / 1000.0, FirstLine(e));
  }
}

Communicator::~Communicator() = default;

c10d::Backend& Communicator::Group(const std::string& name) const {
  auto it = groups_.find(name);
  DAPPLE_CHECK(it != groups_.end(), "no process group " + name);
  return *it->second;
}

CommWork Communicator::Send(const torch::Tensor& t, int peer, uint32_t tag, std::string what) {
  DAPPLE_CHECK(t.is_contiguous());
  if (peer == env_.rank) {
    DAPPLE_CHECK(to_self_.emplace(tag, t.clone()).second, what + ": a second message to itself");
    return CommWork();
  }
  return SendInGroup(t, "", peer, tag, std::move(what));
}

CommWork Communicator::Recv(const torch::Tensor& t, int peer, uint32_t tag, std::string what) {
  DAPPLE_CHECK(t.is_contiguous());
  if (peer == env_.rank) return CommWork(to_self_, tag, t, std::move(what));
  return RecvInGroup(t, "", peer, tag, std::move(what));
}

// Note [Transport by device]: a staged operation hands Gloo host copies; the CommWork keeps
// the caller's tensors first (what tensors() returns), the host copies after them.
CommWork Communicator::SendInGroup(const torch::Tensor& t, const std::string& group, int member,
                                   uint32_t tag, std::string what) {
  DAPPLE_CHECK(t.is_contiguous());
  std::vector<torch::Tensor> v{Stages(t) ? HostCopy(t) : t};
  try {
    auto work = BackendFor(v[0], group, Lane::kSend, member).send(v, member, static_cast<int>(tag));
    return CommWork(work, {t, v[0]}, std::move(what));
  } catch (const std::exception& e) {
    throw CommError(fmt::format("{}: send failed: {}", what, FirstLine(e)));
  }
}

CommWork Communicator::RecvInGroup(const torch::Tensor& t, const std::string& group, int member,
                                   uint32_t tag, std::string what) {
  DAPPLE_CHECK(t.is_contiguous());
  const bool staged = Stages(t);
  std::vector<torch::Tensor> v{staged ? torch::empty_like(t, t.options().device(torch::kCPU)) : t};
  try {
    auto work = BackendFor(v[0], group, Lane::kRecv, member).recv(v, member, static_cast<int>(tag));
    CommWork w(work, {t, v[0]}, std::move(what));
    if (staged) w.OnWaited([t, host = v[0]] { t.copy_(host); });
    return w;
  } catch (const std::exception& e) {
    throw CommError(fmt::format("{}: receive failed: {}", what, FirstLine(e)));
  }
}

void Communicator::CreateGroup(const std::string& name, const std::vector<int>& ranks) {
  DAPPLE_CHECK(!name.empty() && !groups_.count(name));
  int me = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == env_.rank) me = static_cast<int>(i);
  }
  DAPPLE_CHECK(me >= 0, "rank not a member of group " + name);
  try {
    groups_[name] = MakeGlooGroup(c10::make_intrusive<c10d::PrefixStore>("group/" + name, store_),
                                  env_, me, static_cast<int>(ranks.size()), timeout_);
    members_[name] = me;
    if (transport_ == Transport::kNccl) AddNcclGroups(name, me, static_cast<int>(ranks.size()));
  } catch (const std::exception& e) {
    throw CommError(
        fmt::format("rank {}: cannot form process group {}: {}", env_.rank, name, FirstLine(e)));
  }
}

void Communicator::AllReduceSum(torch::Tensor& t, const std::string& group,
                                const std::string& what) {
  AllReduceSumAsync(t, group, what).Wait(timeout_);
}

CommWork Communicator::AllReduceSumAsync(const torch::Tensor& t, const std::string& group,
                                         std::string what) {
  const bool staged = Stages(t);
  std::vector<torch::Tensor> v{staged ? HostCopy(t) : t};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  opts.timeout = timeout_;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = BackendFor(v[0], group, Lane::kCollective, 0).allreduce(v, opts);
  } catch (const std::exception& e) {
    throw CommError(fmt::format("{}: allreduce failed: {}", what, FirstLine(e)));
  }
  CommWork w(work, {t, v[0]}, std::move(what));
  if (staged) w.OnWaited([t, host = v[0]] { t.copy_(host); });
  return w;
}

CommWork Communicator::AllToAllAsync(const torch::Tensor& output, const torch::Tensor& input,
                                     const std::string& group, std::string what) {
  c10d::AllToAllOptions opts;
  opts.timeout = timeout_;
  const bool staged = Stages(output);
  // alltoall_base takes non-const references
  torch::Tensor out =
      staged ? torch::empty_like(output, output.options().device(torch::kCPU)) : output;
  torch::Tensor in = staged ? HostCopy(input) : input;
  std::vector<int64_t> equal_splits;  // empty: n equal parts
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = BackendFor(in, group, Lane::kCollective, 0)
               .alltoall_base(out, in, equal_splits, equal_splits, opts);
  } catch (const std::exception& e) {
    throw CommError(fmt::format("{}: alltoall failed: {}", what, FirstLine(e)));
  }
  CommWork w(work, {output, input, out, in}, std::move(what));
  if (staged) w.OnWaited([output, out] { output.copy_(out); });
  return w;
}

CommWork Communicator::AllGatherAsync(const std::vector<torch::Tensor>& outputs,
                                      const torch::Tensor& input, const std::string& group,
                                      std::string what) {
  c10d::AllgatherOptions opts;
  opts.timeout = timeout_;
  const bool staged = Stages(input);
  std::vector<std::vector<torch::Tensor>> out{outputs};
  std::vector<torch::Tensor> in{staged ? HostCopy(input) : input};
  if (staged) {
    for (auto& o : out[0]) o = torch::empty_like(o, o.options().device(torch::kCPU));
  }
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = BackendFor(in[0], group, Lane::kCollective, 0).allgather(out, in, opts);
  } catch (const std::exception& e) {
    throw CommError(fmt::format("{}: allgather failed: {}", what, FirstLine(e)));
  }
  std::vector<torch::Tensor> kept = outputs;
  kept.push_back(input);
  if (staged) {
    kept.insert(kept.end(), out[0].begin(), out[0].end());
    kept.push_back(in[0]);
  }
  CommWork w(work, kept, std::move(what));
  if (staged) {
    w.OnWaited([outputs, host = out[0]] {
      for (size_t i = 0; i < outputs.size(); ++i) outputs[i].copy_(host[i]);
    });
  }
  return w;
}

void Communicator::Barrier(const std::string& what) {
  c10d::BarrierOptions opts;
  opts.timeout = timeout_;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = Group("").barrier(opts);
  } catch (const std::exception& e) {
    throw CommError(fmt::format("{}: barrier failed: {}", what, FirstLine(e)));
  }
  CommWork(work, {}, what).Wait(timeout_);
}

std::vector<std::string> Communicator::GatherStrings(const std::string& key,
                                                     const std::string& value, int root) {
  auto full = [&](int r) { return "gather/" + key + "/" + std::to_string(r); };
  std::vector<std::string> out;
  const Deadline started(timeout_);  // Note [One deadline per wait chain]
  try {
    store_->set(full(env_.rank), std::vector<uint8_t>(value.begin(), value.end()));
    if (env_.rank != root) return out;
    for (int r = 0; r < env_.world_size; ++r) {
      store_->wait({full(r)}, started.Left());
      auto bytes = store_->get(full(r));
      out.emplace_back(bytes.begin(), bytes.end());
    }
  } catch (const std::exception& e) {
    throw CommError(
        fmt::format("rank {}: gathering {} failed after {:.1f} s (timeout {:.1f} s): {}", env_.rank,
                    key, started.ElapsedSeconds(), timeout_.count() / 1000.0, FirstLine(e)));
  }
  return out;
}

void Communicator::Publish(const std::string& key, const std::string& value) {
  try {
    store_->set("meta/" + key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    throw CommError(fmt::format("rank {}: publishing {} failed: {}", env_.rank, key, FirstLine(e)));
  }
}

std::string Communicator::Lookup(const std::string& key, const std::string& what) {
  try {
    store_->wait({"meta/" + key}, timeout_);
    auto bytes = store_->get("meta/" + key);
    return std::string(bytes.begin(), bytes.end());
  } catch (const std::exception& e) {
    throw CommError(fmt::format("{}: {}", what, FirstLine(e)));
  }
}

}  // namespace dapple
