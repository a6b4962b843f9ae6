// The event engine's devices: see engine.h and event_engine.h.
#include "dapple/sim/event_engine.h"

#include <algorithm>
#include <limits>

#include "dapple/common/error.h"
#include "dapple/sim/engine.h"

namespace dapple::internal {

// Note [Lazy devices]: a device runs its list eagerly until a receive whose transfer has
// not finished, or an allreduce its peers have not reached. Its clock may run ahead of the
// global time `now_`, but everything it produces (a transfer becoming ready) is stamped with
// its clock, which is >= now_ when it was woken, so events never arrive in the past. Only
// transfers that hold resources need the global clock, to decide who gets a link first.
// Such a transfer joins the waiting list as soon as its last sender sent it, even when it
// is ready only after now_: the list is in priority order, ready time first (Note
// [Due and future transfers] in waiting_transfers.h), so the earliest ready time after
// now_ is the next instant unless a finish comes first. The event heap holds only finishes. (At an
// instant, every finish is processed before the pass, as when ready times were events of their own
// that came after the finishes of the same instant.)

// Note [Twin replicas]
// Replicas of a stage that cost the same (same device kind and slice size; the setup marks
// them in EngineStage::twins when its caller asks, PrepareOptions::twins: the planner's
// BoundedRun, never the plain Simulate) run the same list, receive the same transfers (one per
// boundary and micro-batch, for all of them), reach the allreduce at the same time and leave it
// together: each replica computes exactly what the first computes, the same sums in the
// same order. So the engine runs only the first replica of such a stage, counts its send
// as every replica's (a transfer waits for RunReplicas senders) and, at the end, copies its
// state to the others. A stage of n twins costs one device's instructions instead of n
// (the planner's wide stages on large clusters). Not with a timeline, whose
// events are per device, nor with op_scale, which stretches each device's compute by how
// many compute at that moment.

// Note [Watching a run]: the watcher is asked after the first `running_` device stops, then
// every kBoundEvery x `running_`. Its bound costs O(devices), so it is not asked after every
// `running_` stops: the runs stop a little later and the planner's calls take fewer
// instructions in all; asked less often still, they gain no more.
constexpr size_t kBoundEvery = 4;

template <bool kDetailed>
Engine<kDetailed>::Engine(const EngineSetup& s, Scratch& scratch)
    : s_(s),
      S_(s.num_stages),
      M_(s.num_micro_batches),
      V_(s.num_stages * s.num_chunks),
      dev_(scratch.dev),
      last_bwd_start_(scratch.last_backward_start),
      last_bwd_scale_(scratch.last_backward_scale),
      xfer_(scratch.xfer),
      ar_arrived_(scratch.ar_arrived),
      ar_ready_(scratch.ar_ready),
      resource_busy_(scratch.resource_busy),
      runnable_(scratch.runnable),
      receiver_stage_(scratch.receiver_stage),
      watched_pc_(scratch.watched_pc),
      waiting_(scratch.waiting),
      queue_(scratch.queue),
      stopping_(s.watcher && s.stop_above_ms < std::numeric_limits<double>::infinity() &&
                s.op_scale.empty()),
      scaled_(kDetailed && !s.op_scale.empty()),
      resume_ms_(s.resume_ms) {
  dev_.assign(s.devices.size(), DeviceState{});
  for (size_t d = 0; d < s.start_ms.size(); ++d) dev_[d].clock = s.start_ms[d];
  xfer_.assign(2 * std::max(V_ - 1, 0) * M_, Transfer{});
  last_bwd_start_.assign(s.devices.size() * s.num_chunks, 0.0);
  last_bwd_scale_.assign(s.devices.size() * s.num_chunks, 1.0);
  ar_arrived_.assign(S_, 0);
  ar_ready_.assign(S_, 0.0);
  resource_busy_.assign(s.num_resources, 0);
  runnable_.clear();
  waiting_.Clear();
  queue_.clear();
  exposed_.assign(S_, 0.0);
  receiver_stage_.resize(s.routes.size());
  for (size_t r = 0; r < s.routes.size(); ++r)
    receiver_stage_[r] = ReceiverStageOf(static_cast<int>(r));
  for (const EngineStage& st : s.stages)
    DAPPLE_CHECK(!st.twins || (!s.record_timeline && s.op_scale.empty()),
                 "twin replicas with a timeline or op_scale");
  running_ = 0;
  for (const EngineStage& st : s.stages) running_ += RunReplicas(st);
  watched_pc_.assign(S_, -1);
  if (stopping_) s.watcher->Prepare(s, watched_pc_);
  until_bound_ = running_;
  if (!s.op_scale.empty()) {
    DAPPLE_CHECK(s.op_scale.size() == s.devices.size());
    intervals_.resize(s.devices.size());
    for (size_t d = 0; d < s.devices.size(); ++d) {
      const int length = s.stages[s.devices[d].stage].length;
      DAPPLE_CHECK(static_cast<int>(s.op_scale[d].size()) == length);
      intervals_[d].assign(length, {0.0, 0.0});
    }
  }
}

template <bool kDetailed>
EngineResult Engine<kDetailed>::Run() {
  for (int d = static_cast<int>(dev_.size()) - 1; d >= 0; --d)
    if (s_.devices[d].replica < RunReplicas(s_.stages[s_.devices[d].stage])) runnable_.push_back(d);
  while (true) {
    while (!runnable_.empty()) {
      int d = runnable_.back();
      runnable_.pop_back();
      RunDevice(d);
      // Note [Watching a run]: O(1) per stop on average.
      if (stopping_ && --until_bound_ == 0) {
        until_bound_ = kBoundEvery * running_;
        const double bound = s_.watcher->Bound(dev_);
        if (ProvesLonger(bound, s_.stop_above_ms)) {
          EngineResult r;
          r.stopped = true;
          r.bound_ms = bound;
          return r;
        }
      }
    }
    if (!queue_.empty() && queue_.front().time <= now_) {
      const Event e = queue_.front();
      queue_.pop();
      Finish(e.transfer, e.time);
      continue;
    }
    if (StartWaiting()) continue;
    // The next instant: a finish, or the first waiting transfer that is not ready yet.
    const double later = waiting_.NextReady();
    if (later < std::numeric_limits<double>::infinity() &&
        (queue_.empty() || later <= queue_.front().time)) {
      now_ = later;
      waiting_.Advance(now_);
      waiting_dirty_ = true;
    } else if (!queue_.empty()) {
      now_ = queue_.front().time;
    } else {
      break;
    }
  }
  CopyTwins();
  ThrowIfUnfinished(s_, dev_);
  EngineResult r;
  r.devices.resize(dev_.size());
  for (size_t d = 0; d < dev_.size(); ++d) {
    r.devices[d] = {dev_[d].clock, dev_[d].busy, dev_[d].peak_bytes, dev_[d].peak_in_flight};
    r.instructions += dev_[d].pc;
  }
  r.events = std::move(events_);
  r.allreduce_exposed_ms = std::move(exposed_);
  r.compute_intervals = std::move(intervals_);
  r.comm_load = std::move(comm_load_);
  return r;
}

// A forward or a backward (or its I or W part) of device d at `clock`. B frees the
// micro-batch's activations; in the split schedules I keeps them for W, which frees them.
// B and W produce weight gradients (bucket readiness).
template <bool kDetailed>
inline void Engine<kDetailed>::RunCompute(int d, int pc, const Instruction& in,
                                          const EngineChunkCost& cost, DeviceState& dv,
                                          double& clock) {
  const bool forward = in.op == Op::kForward;
  const double base = forward                   ? cost.forward_ms
                      : in.op == Op::kBackward  ? cost.backward_ms
                      : in.op == Op::kInputGrad ? cost.input_grad_ms
                                                : cost.weight_grad_ms;
  const double ms = base * Scale(d, pc) + Resume(dv, clock);
  dv.done += base;
  const bool weight_grads = !forward && in.op != Op::kInputGrad;
  if (weight_grads) {
    last_bwd_start_[d * s_.num_chunks + in.chunk] = clock;
    last_bwd_scale_[d * s_.num_chunks + in.chunk] = Scale(d, pc);
  }
  if (timeline()) {
    const char* category = forward ? "forward" : in.op == Op::kWeightGrad ? "weight" : "backward";
    Record(d, in, category, clock, clock + ms,
           VirtualStageOf(s_.devices[d].stage, in.chunk, S_, s_.v_shape));
  }
  Interval(d, pc, clock, clock + ms);
  clock += ms;
  dv.compute_end = clock;
  dv.busy += ms;
  if (forward) {
    dv.bytes += cost.bytes_per_micro_batch;
    dv.peak_bytes = std::max(dv.peak_bytes, dv.bytes);
    dv.peak_in_flight = std::max(dv.peak_in_flight, ++dv.in_flight);
    return;
  }
  if (pc == watched_pc_[s_.devices[d].stage]) dv.last_backward_end = clock;
  if (in.op == Op::kInputGrad) {
    dv.bytes += cost.rebuilt_bytes;
    dv.peak_bytes = std::max(dv.peak_bytes, dv.bytes);
  }
  if (weight_grads) {
    dv.bytes -= cost.bytes_per_micro_batch + (in.op == Op::kWeightGrad ? cost.rebuilt_bytes : 0);
    --dv.in_flight;
  }
}

// Device d arrives at its stage's allreduce at `clock`. Returns false while other replicas
// have yet to arrive (d waits); the last to arrive runs it and releases the others.
template <bool kDetailed>
inline bool Engine<kDetailed>::RunAllReduce(int d, int pc, const Instruction& in, DeviceState& dv,
                                            double& clock) {
  const int stage = s_.devices[d].stage;
  const EngineStage& st = s_.stages[stage];
  ar_ready_[stage] = std::max(ar_ready_[stage], clock);
  if (++ar_arrived_[stage] < RunReplicas(st)) return false;
  const double start = ar_ready_[stage];
  const double end =
      st.bucket_ms.empty() ? start + st.allreduce_ms : std::max(start, RunBuckets(stage));
  exposed_[stage] = st.bucket_ms.empty() ? st.allreduce_ms : end - start;
  if (st.bucket_ms.empty()) Load(start, end, st.allreduce_load);
  ar_arrived_[stage] = 0;
  ar_ready_[stage] = 0;
  for (int r = st.first_device; r < st.first_device + RunReplicas(st); ++r) {
    if (timeline()) Record(r, in, "allreduce", start, end, stage);
    if (st.bucket_ms.empty()) (r == d ? dv : dev_[r]).done += st.allreduce_ms;
    if (r == d) continue;
    dev_[r].clock = end;
    dev_[r].pc = pc + 1;
    runnable_.push_back(r);
  }
  clock = end;
  return true;
}

// Runs device d from its pc until it blocks or ends. The one exhaustive switch over Op.
// Its clock and pc are locals while it runs, written back when it stops; the rest of its
// state is updated in place (a whole copy in and out cost a stalled wide load per stop:
// the copy read back fields just written one by one).
template <bool kDetailed>
inline void Engine<kDetailed>::RunDevice(int d) {
  DeviceState& dv = dev_[d];
  const EngineDevice& cfg = s_.devices[d];
  const EngineStage& st = s_.stages[cfg.stage];
  const EngineChunkCost* costs = s_.costs.data() + cfg.first_cost;
  const Instruction* prog = st.program;
  double clock = dv.clock;
  int pc = dv.pc;
  auto stop = [&] {
    dv.clock = clock;
    dv.pc = pc;
  };
  for (; pc < st.length; ++pc) {
    const Instruction in = prog[pc];
    const EngineChunkCost& cost = costs[in.chunk];
    auto vs = [&] { return VirtualStageOf(cfg.stage, in.chunk, S_, s_.v_shape); };
    switch (in.op) {
      case Op::kForward:
      case Op::kBackward:
      case Op::kInputGrad:
      case Op::kWeightGrad:
        RunCompute(d, pc, in, cost, dv, clock);
        break;
      case Op::kSendAct:
        Arrive(ActId(vs(), in.micro_batch), ActRoute(vs()), clock, RunReplicas(st));
        break;
      case Op::kSendGrad:
        Arrive(GradId(vs() - 1, in.micro_batch), GradRoute(vs() - 1), clock, RunReplicas(st));
        break;
      case Op::kRecvAct:
      case Op::kRecvGrad: {
        const int id =
            in.op == Op::kRecvAct ? ActId(vs() - 1, in.micro_batch) : GradId(vs(), in.micro_batch);
        const Transfer& x = xfer_[id];
        if (x.finish < 0) {
          dv.blocked_on = id;
          stop();
          return;
        }
        // Note [Waking up on shared cores]: a device that waits for a message sleeps in
        // its receive; once the bytes are in, gloo's reader thread and then the waiting
        // thread each need a core. On a machine whose cores the devices share, they
        // often wait for one until another process's op or time slice ends, longer than
        // the bytes take with more ranks than cores (docs/two-server.md). wake_ms is that mean
        // excess (`dapple calibrate`: emulation.wake_s); a message that is in before its receive is
        // reached is read in the background and costs nothing.
        if (x.finish > clock) clock = x.finish + s_.wake_ms;
        break;
      }
      case Op::kAllReduceGrads:
        if (!RunAllReduce(d, pc, in, dv, clock)) {
          stop();  // released by the last replica to arrive
          return;
        }
        break;
      case Op::kOptimizerStep: {
        const double ms = cfg.step_ms * Scale(d, pc);
        dv.done += cfg.step_ms;
        if (timeline()) Record(d, in, "step", clock, clock + ms, cfg.stage);
        Interval(d, pc, clock, clock + ms);
        clock += ms;
        dv.busy += ms;
        break;
      }
    }
  }
  stop();
}

// Starts, at now_, every waiting transfer ready by then whose resources are all free, in
// priority order.
template <bool kDetailed>
inline bool Engine<kDetailed>::StartWaiting() {
  if (!waiting_dirty_) return false;  // nothing freed or come ready since the last pass
  waiting_dirty_ = false;
  std::vector<Waiting>& due = waiting_.due();
  bool started = false;
  size_t kept = 0;  // the due ones that stay, moved to the front in order
  for (size_t i = 0; i < due.size(); ++i) {
    const Waiting w = due[i];
    const EngineRoute& route = s_.routes[w.route];
    bool free = true;
    for (int r : route.resources) free = free && !resource_busy_[r];
    if (!free) {
      due[kept++] = w;
      continue;
    }
    for (int r : route.resources) resource_busy_[r] = 1;
    xfer_[w.id].start = now_;
    queue_.push({now_ + route.ms, w.id});
    started = true;
  }
  due.resize(kept);
  return started;
}

// Note [Twin replicas]: the replicas the engine did not run end as the first did.
template <bool kDetailed>
void Engine<kDetailed>::CopyTwins() {
  for (const EngineStage& st : s_.stages)
    if (st.twins)
      for (int r = st.first_device + 1; r < st.first_device + st.replicas; ++r)
        dev_[r] = dev_[st.first_device];
}

EngineResult RunEngine(const EngineSetup& setup) {
  thread_local Scratch scratch;
  if (setup.record_timeline || !setup.op_scale.empty()) return Engine<true>(setup, scratch).Run();
  return Engine<false>(setup, scratch).Run();
}

}  // namespace dapple::internal
