// The event engine's transfers (how they arrive and finish) and bucketed allreduces: see
// engine.h.
#include <algorithm>
#include <string>

#include "dapple/sim/engine.h"

namespace dapple::internal {

// The buckets of `stage`'s overlapped allreduce, one after another from when each is
// ready on every replica; returns when the last one ends.
template <bool kDetailed>
double Engine<kDetailed>::RunBuckets(int stage) {
  const EngineStage& st = s_.stages[stage];
  const int R = st.replicas;
  double free = 0;  // when the stage's communication stream is free
  for (size_t k = 0; k < st.bucket_ms.size(); ++k) {
    double ready = 0;
    for (int j = 0; j < RunReplicas(st); ++j) {
      const int at = (st.first_device + j) * s_.num_chunks + st.bucket_chunk[k];
      ready = std::max(ready,
                       last_bwd_start_[at] + last_bwd_scale_[at] * st.bucket_ready_ms[k * R + j]);
    }
    const double start = std::max(free, ready);
    free = start + st.bucket_ms[k];
    Load(start, free, st.allreduce_load);
    if (timeline())
      events_.push_back(
          {st.bucket_track, "AR b" + std::to_string(k), "allreduce", start, free, stage, -1});
  }
  return free;
}

// One sender of transfer `id` executed its send at `clock`.
template <bool kDetailed>
void Engine<kDetailed>::Arrive(int id, int r, double clock, int senders) {
  Transfer& x = xfer_[id];
  x.ready = std::max(x.ready, clock);
  if (++x.arrived != senders) return;
  x.route = r;
  const EngineRoute& route = s_.routes[r];
  if (!s_.contended || route.resources.empty()) {  // it runs as soon as it is ready
    x.start = x.ready;
    Finish(id, x.ready + route.ms);
  } else {
    const int dir = r >= V_ - 1;
    Enqueue({x.ready, (static_cast<long long>(r - dir * (V_ - 1)) * M_ + (id - r * M_)) * 2 + dir,
             id, r});
  }
}

// Adds a transfer that holds resources, once ready (it may be ready only later than
// now_), to the waiting list in priority order.
template <bool kDetailed>
void Engine<kDetailed>::Enqueue(const Waiting& w) {
  waiting_.Add(w, now_);
  waiting_dirty_ = waiting_dirty_ || w.ready <= now_;
}

// Transfer `id` finished at `end`: frees its resources and wakes its receivers.
template <bool kDetailed>
void Engine<kDetailed>::Finish(int id, double end) {
  Transfer& x = xfer_[id];
  x.finish = end;
  const int route = x.route;
  Load(x.start, end, s_.routes[route].load);
  if (s_.contended) {
    for (int r : s_.routes[route].resources) resource_busy_[r] = 0;
    waiting_dirty_ = waiting_dirty_ || !s_.routes[route].resources.empty();
  }
  if (timeline()) {
    bool act = route < V_ - 1;
    int from = act ? route : route - (V_ - 1) + 1;  // virtual stage
    Instruction in{act ? Op::kSendAct : Op::kSendGrad, id % M_, from / S_};
    Record(static_cast<int>(dev_.size()) + route, in, "transfer", x.start, end, from);
  }
  const EngineStage& st = s_.stages[receiver_stage_[route]];
  for (int r = st.first_device; r < st.first_device + RunReplicas(st); ++r) {
    if (dev_[r].blocked_on != id) continue;
    dev_[r].blocked_on = -1;
    runnable_.push_back(r);
  }
}

// The engine's other members are defined, and instantiated where used, in event_engine.cc.
template double Engine<true>::RunBuckets(int);
template void Engine<true>::Arrive(int, int, double, int);
template void Engine<true>::Enqueue(const Waiting&);
template void Engine<true>::Finish(int, double);
template double Engine<false>::RunBuckets(int);
template void Engine<false>::Arrive(int, int, double, int);
template void Engine<false>::Enqueue(const Waiting&);
template void Engine<false>::Finish(int, double);

}  // namespace dapple::internal
