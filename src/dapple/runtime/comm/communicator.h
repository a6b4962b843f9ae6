// The runtime's communicator over c10d (docs/design.md section 7): a TCPStore rendezvous from
// the usual launcher variables, ProcessGroupGloo for point-to-point data and one sub-group
// per replicated stage for its allreduce; CUDA tensors over NCCL or staged through the host
// (Note [Transport by device], transport.h). Every wait has a timeout and a failure names
// what was being waited on.
#pragma once

#include <torch/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "dapple/runtime/comm/device.h"
#include "dapple/runtime/comm/transport.h"

namespace dapple {

// Where this process sits in the job: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT (the variables torchrun, mpirun wrappers and Slurm scripts set).
struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // DAPPLE_RENDEZVOUS_FILE: a FileStore path instead of the TCPStore, so that a job on one
  // machine listens on no network port for its rendezvous (Note [Rendezvous exposure]).
  std::string rendezvous_file;

  // Reads the variables; a missing one takes the single-process default above; a
  // malformed one throws InputError naming it.
  static DistEnv FromEnvironment();
};

// Note [One deadline per wait chain]: a failure must show within one --timeout-s, whichever
// wait sees it first. Waits that follow one another without anything else between them
// (the pieces of one receive, the sends pending at the end of a step, the buckets of an
// allreduce, the ranks of a gather) form a chain and share one Deadline: each waits only
// for what is left of the timeout since the chain began, so k waits cannot add up to k
// timeouts. A chain ends when its last wait returns; the next wait starts a new one.
class Deadline {
 public:
  explicit Deadline(std::chrono::milliseconds timeout)
      : start_(std::chrono::steady_clock::now()), timeout_(timeout) {}
  // What is left of the timeout, at least 1 ms (c10d reads 0 as "no timeout").
  std::chrono::milliseconds Left() const;
  // Seconds since the chain began.
  double ElapsedSeconds() const;
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::milliseconds timeout_;
};

// An asynchronous send, receive or collective. Keeps its tensors alive until Wait returns.
// Wait rethrows a failure or a timeout as CommError prefixed with `what` (for example
// "rank 2 (stage 1, replica 0), step 3: RA4 from rank 0").
// Note [Messages to oneself]: in a V-shaped plan the last group's two chunks hand their
// activations and gradients to each other on one rank, and Gloo has no pair from a rank to
// itself. Such a message stays in the process: the send keeps a copy under its tag (the tag
// names the boundary, direction and micro-batch), and the receive copies it into its buffer
// when waited for. A rank's instruction list sends before it waits for the receive (the
// schedule's validator and simulator see one device that would otherwise wait on itself).
using MessagesToSelf = std::map<uint32_t, torch::Tensor>;

class CommWork {
 public:
  CommWork() = default;
  CommWork(c10::intrusive_ptr<c10d::Work> work, std::vector<torch::Tensor> tensors,
           std::string what);
  // A receive from this rank itself (Note [Messages to oneself]).
  CommWork(MessagesToSelf& box, uint32_t tag, torch::Tensor buffer, std::string what);
  bool valid() const { return work_.defined() || from_self_ != nullptr; }
  // True once the operation finished (successfully or not); never blocks.
  bool Done() const;
  // Waits at most what is left of `deadline` (Note [One deadline per wait chain]).
  void Wait(const Deadline& deadline);
  void Wait(std::chrono::milliseconds timeout) { Wait(Deadline(timeout)); }
  // The caller's tensors (a receive's buffer first); a staged operation's host copies
  // follow them (Note [Transport by device]).
  const std::vector<torch::Tensor>& tensors() const { return tensors_; }
  const std::string& what() const { return what_; }
  // Records when the operation completes (steady_clock, ms), from the thread that completes
  // it; CompletedMs() is < 0 until then, and when not recorded. For timelines: Wait returns
  // only when its caller gets there.
  void RecordCompletion();
  double CompletedMs() const { return completed_ms_ ? completed_ms_->load() : -1.0; }
  // Runs `finish` once, after the first Wait that succeeds (a staged receive copies its host
  // buffer into the CUDA tensor there: Note [Transport by device]).
  void OnWaited(std::function<void()> finish) { finish_ = std::move(finish); }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::vector<torch::Tensor> tensors_;
  std::string what_;
  std::shared_ptr<std::atomic<double>> completed_ms_;
  MessagesToSelf* from_self_ = nullptr;  // with from_tag_: a receive from this rank
  uint32_t from_tag_ = 0;
  std::function<void()> finish_;
};

// Thread-compatible (one thread drives it), except that GatherStrings may also be called
// from one other thread (the checkpoint writer, Note [Asynchronous checkpoints]): it touches
// only the store, whose operations libtorch's stores serialise with a lock. Construction is
// collective over the world: every rank must construct it with the same world size.
class Communicator {
 public:
  // Note [Rendezvous exposure]: the rendezvous store has no authentication, so whoever can
  // reach it can join or disturb the job. A single process uses an in-memory store; a job
  // on one machine started by LaunchLocal a FileStore in a private folder (mode 0700,
  // env.rendezvous_file); only a job of several nodes serves a TCPStore at
  // env.master_addr:master_port (libtorch 1.13's TCPStore listens on every interface of
  // rank 0's host). Gloo's own connections listen on the loopback for a local job.
  //
  // Connects to (rank 0: serves) that store and builds the world process group. `timeout` bounds
  // every later wait. Throws InputError naming the address when the rendezvous cannot be reached
  // within the timeout. `device`: this process's compute device; with more than one rank,
  // construction gathers every rank's place to choose the transport of CUDA tensors (Note
  // [Transport by device]).
  Communicator(const DistEnv& env, std::chrono::milliseconds timeout,
               torch::Device device = torch::Device(torch::kCPU));
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const torch::Device& device() const { return device_; }
  Transport transport() const { return transport_; }

  // Point-to-point with `tag`; a send must be paired with a receive of the same tag and
  // size on `peer`, which may be this rank (Note [Messages to oneself]). REQUIRES:
  // contiguous tensors.
  CommWork Send(const torch::Tensor& t, int peer, uint32_t tag, std::string what);
  CommWork Recv(const torch::Tensor& t, int peer, uint32_t tag, std::string what);

  // The same inside group `group` ("" = the world, whose member index is the rank):
  // `member` is the peer's index in it, and a sub-group's tags are its own (its connections
  // carry nothing of the world's point-to-point traffic). Not to oneself.
  CommWork SendInGroup(const torch::Tensor& t, const std::string& group, int member, uint32_t tag,
                       std::string what);
  CommWork RecvInGroup(const torch::Tensor& t, const std::string& group, int member, uint32_t tag,
                       std::string what);

  // Creates sub-group `name` over `ranks` (ascending global ranks). Must be called by
  // exactly the member ranks, each with the same name and ranks; a rank that is not a
  // member must not call it.
  void CreateGroup(const std::string& name, const std::vector<int>& ranks);
  // In-place sum of `t` over the members of group `name` ("" = the whole world); blocks.
  void AllReduceSum(torch::Tensor& t, const std::string& group, const std::string& what);
  // The same, asynchronous: the sum is in `t` once the returned work's Wait returns.
  // Collectives on one group must be started in the same order on every member.
  CommWork AllReduceSumAsync(const torch::Tensor& t, const std::string& group, std::string what);
  // Member j of group `name` receives the j-th of the group's n equal parts of `input` from
  // every member, in `output` by sender (part i from member i). REQUIRES: contiguous 1-D
  // tensors of one size divisible by n. Gloo's alltoall: each member sends (n-1)/n of it.
  CommWork AllToAllAsync(const torch::Tensor& output, const torch::Tensor& input,
                         const std::string& group, std::string what);
  // outputs[i] (of the group's n members) receives member i's `input`; every tensor has
  // input's size. Outputs may be views of one buffer.
  CommWork AllGatherAsync(const std::vector<torch::Tensor>& outputs, const torch::Tensor& input,
                          const std::string& group, std::string what);
  void Barrier(const std::string& what);

  // Small metadata through the store: every rank calls with its own `value`; rank `root`
  // gets all values by rank, the others get an empty vector. `key` must be fresh. The
  // root's waits for the ranks share one deadline of the timeout.
  std::vector<std::string> GatherStrings(const std::string& key, const std::string& value,
                                         int root);
  // Small metadata through the store, one writer and any readers: Publish sets `key`
  // (fresh); Lookup waits for it up to the timeout (CommError naming `what` after that).
  void Publish(const std::string& key, const std::string& value);
  std::string Lookup(const std::string& key, const std::string& what);

 private:
  // The NCCL groups of one process group (Note [Transport by device]): collectives, and
  // point-to-point from the lower member to the higher (up) and back (down).
  struct NcclGroups {
    c10::intrusive_ptr<c10d::Backend> collectives, up, down;
  };
  enum class Lane { kCollective, kSend, kRecv };

  static c10::intrusive_ptr<c10d::Store> MakeStore(const DistEnv& env,
                                                   std::chrono::milliseconds timeout);
  c10d::Backend& Group(const std::string& name) const;
  // The backend that carries `t` in group `name`: NCCL for a CUDA tensor under kNccl (for
  // point-to-point with `member`, the lane of the direction), else Gloo.
  c10d::Backend& BackendFor(const torch::Tensor& t, const std::string& name, Lane lane,
                            int member) const;
  // True when `t` goes through a host copy (Note [Transport by device]).
  bool Stages(const torch::Tensor& t) const;
  void ChooseTransport();
  void AddNcclGroups(const std::string& name, int member, int size);

  DistEnv env_;
  std::chrono::milliseconds timeout_;
  torch::Device device_;
  Transport transport_ = Transport::kGloo;
  c10::intrusive_ptr<c10d::Store> store_;
  std::map<std::string, c10::intrusive_ptr<c10d::Backend>> groups_;  // "" = world
  std::map<std::string, NcclGroups> nccl_;                           // under kNccl
  std::map<std::string, int> members_;  // this rank's index in each group ("" = rank)
  MessagesToSelf to_self_;              // Note [Messages to oneself]
};

}  // namespace dapple
