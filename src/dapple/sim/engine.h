// The event engine (event_engine.cc, engine_transfers.cc): the class both files define, and
// its Notes on what it runs. Internal to dapple_sim.
#pragma once

#include <utility>
#include <vector>

#include "dapple/common/chunk_placement.h"
#include "dapple/sim/engine_state.h"
#include "dapple/sim/event_engine.h"

namespace dapple::internal {

// Note [Plain runs]: the planner's runs record no timeline and scale no compute; the engine is
// compiled twice, and the plain one (kDetailed false) has neither's branches in its loop. Both
// run the same instructions in the same order: a plain run's times are the detailed run's
// (the scale it leaves out is 1).
template <bool kDetailed>
// The members the run's loop calls on every instruction are inline (event_engine.cc); the
// two Run calls once each are always inlined into it: with the class in a header (external
// linkage) the compiler no longer inlines a function called once by itself, and the calls would
// cost instructions in the planner's innermost loop.
class Engine {
 public:
  Engine(const EngineSetup& s, Scratch& scratch);
  EngineResult Run();

 private:
  // Transfers are per virtual boundary (Note [Chunks] in schedule.h); with one chunk the
  // virtual stages are the stages.
  int ActId(int boundary, int mb) const { return boundary * M_ + mb; }
  int GradId(int boundary, int mb) const { return (V_ - 1 + boundary) * M_ + mb; }
  // Route of a transfer id: id / M_ (activations: the boundary; gradients: V - 1 + it).
  // The senders pass it (ActRoute, GradRoute): a division per transfer cost more than the
  // rest of its bookkeeping.
  int ActRoute(int boundary) const { return boundary; }
  int GradRoute(int boundary) const { return V_ - 1 + boundary; }
  // Stage (device group) whose devices receive the transfers of `route`.
  int ReceiverStageOf(int route) const {
    return GroupOfVirtualStage(route < V_ - 1 ? route + 1 : route - (V_ - 1), S_, s_.v_shape);
  }

  // Note [Resuming on shared cores]: when devices are processes sharing a machine, a forward
  // or backward that starts after its device sat idle finds its weights evicted from the
  // caches by the others and its process asleep: it takes resume_ms more (measured by
  // `dapple calibrate` as a token ring's chunk against the same chunk alone). Back-to-back
  // compute pays nothing; STEP's update_ms is profiled cache-cold already.
  double Resume(const DeviceState& dv, double clock) const {
    if (resume_ms_ == 0) return 0;
    return dv.compute_end < 0 || clock > dv.compute_end ? resume_ms_ : 0.0;
  }
  bool timeline() const { return kDetailed && s_.record_timeline; }
  double Scale(int d, int pc) const {
    if constexpr (kDetailed) return scaled_ ? s_.op_scale[d][pc] : 1.0;
    return 1.0;
  }
  void Interval(int d, int pc, double start, double end) {
    if constexpr (kDetailed)
      if (scaled_) intervals_[d][pc] = {start, end};
  }
  void Load(double start, double end, double devices) {
    if constexpr (kDetailed)
      if (scaled_ && devices > 0 && end > start) comm_load_.push_back({start, end, devices});
  }

  void Record(int track, const Instruction& in, const char* category, double start, double end,
              int stage) {
    events_.push_back({track, ToString(in), category, start, end, stage, in.micro_batch});
  }

  // A forward or a backward (or its I or W part) of device d at `clock`. B frees the
  // micro-batch's activations; in the split schedules I keeps them for W, which frees them.
  // B and W produce weight gradients (bucket readiness).
  inline void RunCompute(int d, int pc, const Instruction& in, const EngineChunkCost& cost,
                         DeviceState& dv, double& clock);

  // Device d arrives at its stage's allreduce at `clock`. Returns false while other replicas
  // have yet to arrive (d waits); the last to arrive runs it and releases the others.
  inline bool RunAllReduce(int d, int pc, const Instruction& in, DeviceState& dv, double& clock);

  // Runs device d from its pc until it blocks or ends. The one exhaustive switch over Op.
  // Its clock and pc are locals while it runs, written back when it stops; the rest of its
  // state is updated in place (a whole copy in and out cost a stalled wide load per stop:
  // the copy read back fields just written one by one).
  [[gnu::always_inline]] inline void RunDevice(int d);

  // The buckets of `stage`'s overlapped allreduce, one after another from when each is
  // ready on every replica; returns when the last one ends.
  double RunBuckets(int stage);

  // One sender of transfer `id` executed its send at `clock`.
  void Arrive(int id, int r, double clock, int senders);

  // Adds a transfer that holds resources, once ready (it may be ready only later than
  // now_), to the waiting list in priority order.
  void Enqueue(const Waiting& w);

  // Starts, at now_, every waiting transfer ready by then whose resources are all free, in
  // priority order.
  [[gnu::always_inline]] inline bool StartWaiting();

  // Transfer `id` finished at `end`: frees its resources and wakes its receivers.
  void Finish(int id, double end);

  // Note [Twin replicas]: the replicas the engine did not run end as the first did.
  void CopyTwins();

  const EngineSetup& s_;
  const int S_, M_, V_;
  std::vector<DeviceState>& dev_;
  std::vector<double>& last_bwd_start_;
  std::vector<double>& last_bwd_scale_;
  std::vector<Transfer>& xfer_;
  std::vector<int>& ar_arrived_;
  std::vector<double>& ar_ready_;
  std::vector<char>& resource_busy_;
  std::vector<int>& runnable_;
  std::vector<int>& receiver_stage_;  // ReceiverStageOf per route, without its modulo
  std::vector<int>& watched_pc_;      // per group, from the watcher (-1: none)
  WaitingTransfers& waiting_;
  FinishQueue& queue_;
  const bool stopping_;     // Note [Watching a run] in event_engine.h
  const bool scaled_;       // !s_.op_scale.empty()
  const double resume_ms_;  // s_.resume_ms
  size_t running_ = 0;      // devices the engine runs (Note [Twin replicas] in event_engine.cc)
  size_t until_bound_ = 0;  // device stops until the next look at the bound
  std::vector<TimelineEvent> events_;
  std::vector<double> exposed_;  // per stage, for EngineResult::allreduce_exposed_ms
  std::vector<std::vector<std::pair<double, double>>> intervals_;  // with op_scale
  std::vector<EngineResult::Load> comm_load_;                      // with op_scale
  double now_ = 0;
  bool waiting_dirty_ = false;
};

}  // namespace dapple::internal
