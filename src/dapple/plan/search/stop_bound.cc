// The lower bound behind BoundedRun::Run (bounded_run.h): see stop_bound.h.
//
// Note [Stopping above a time]
// The planner asks most simulations only whether a plan is faster than one it has (a
// neighbour against the current plan, a proposal against the best so far), and most
// answers are no. So a run may stop as soon as it proves the plan slower. What it proves
// with, at any moment of the run:
// * A device runs its list in order, and each instruction takes at least its listed cost
//   (resuming and waking only add, and nothing scales without shared compute; an allreduce
//   without buckets takes at least allreduce_ms, one with buckets at least nothing): it
//   cannot end before its clock plus the listed costs it has not run.
// * The pipeline's drain: with one chunk, when stage g's last backward (B, or I in the
//   split schedules) is for the micro-batch whose gradient it receives last, and stage
//   g + 1's last backward is for that micro-batch too, the former starts no earlier than
//   the latter ends on every replica plus the gradient's transfer (contention only
//   delays). So the bound of stage g + 1's last backward carries down the stages, each
//   adding its own last backward and what follows it in its list (deferred W's, AR,
//   STEP). This is what makes the bound tight early: once the stage that sets the pace is
//   busy, its bound is its end, and the drain below it is the rest of the iteration.
// Each device's last backward is recorded when it ends (the engine records the end of the pc
// the bound names, Note [Watching a run] in sim/event_engine.h); before that its bound is its
// clock plus the listed costs up to it. The engine asks every `devices` times a device stops
// running (the devices it runs: one per stage of twins, Note [Twin replicas] in
// sim/event_engine.cc; O(devices) each time), and stops when the bound exceeds stop_above_ms
// by a relative 1e-9, which keeps the rounding of the sums from stopping a run that would end
// just at stop_above_ms. tests/plan/stop_bound_test.cc checks on random plans that a run
// given its own time (plus 1e-6) never stops and that one given less stops with a bound
// between the two.
//
// Note [The buckets' exposure]
// An overlapped allreduce's listed cost is nothing: its buckets run during the last
// backward (or W), so its time is not the device's. But bucket k is ready only at that
// instruction's start plus its readiness r_k (EngineStage::bucket_ready_ms, r_K-1 being the
// whole instruction), the buckets run one after another, and the device leaves its AR only
// when the last bucket ends. So where the AR follows the device's last B or W with nothing
// between that computes or waits (sends only), it takes at least max_k (r_k + the buckets
// from k on) - r_K-1 after the device reaches it: BucketsLeftAfter, counted as
// the AR's cost once the device has passed it. With one chunk and without resuming (shared
// compute only: no stop there). Without it, a plan whose allreduce sets its time could be
// proved slower only once that allreduce ran, at the end of the run.
#include "dapple/plan/search/stop_bound.h"

#include <algorithm>

#include "dapple/common/error.h"
#include "dapple/cost/grad_buckets.h"

namespace dapple::internal {

namespace {

// Listed cost of one instruction of device d (0 for communication and, with buckets, AR).
double ListedCost(const EngineSetup& s, const EngineStage& st, int d, const Instruction& in) {
  const EngineChunkCost& c = s.costs[s.devices[d].first_cost + in.chunk];
  switch (in.op) {
    case Op::kForward:
      return c.forward_ms;
    case Op::kBackward:
      return c.backward_ms;
    case Op::kInputGrad:
      return c.input_grad_ms;
    case Op::kWeightGrad:
      return c.weight_grad_ms;
    case Op::kOptimizerStep:
      return s.devices[d].step_ms;
    case Op::kAllReduceGrads:
      return st.bucket_ms.empty() ? st.allreduce_ms : 0.0;
    case Op::kSendAct:
    case Op::kSendGrad:
    case Op::kRecvAct:
    case Op::kRecvGrad:
      return 0;
  }
  return 0;
}

}  // namespace

}  // namespace dapple::internal

namespace dapple::internal {

void StopBound::Prepare(const EngineSetup& s, std::vector<int>& watched_pc) {
  setup_ = &s;
  const int S = s.num_stages, v = s.num_chunks;
  const size_t D = s.devices.size();
  last_backward_pc_.assign(S, -1);
  chained_.assign(S, 0);
  work_.assign(D, 0.0);
  tail_.assign(D, 0.0);
  last_cost_.assign(D, 0.0);
  exposed_ar_pc_.assign(S, -1);
  exposure_.assign(D, 0.0);
  facts_.resize(S);
  for (int g = 0; g < S; ++g) {
    const EngineStage& st = s.stages[g];
    // The memo's facts of the list, or those of one pass over it here.
    if (!st.facts) facts_[g] = FactsOf(st.program, st.length, v);
    const ListFacts& f = st.facts ? *st.facts : facts_[g];
    last_backward_pc_[g] = f.last_backward_pc;
    // Note [The buckets' exposure]
    const int K = static_cast<int>(st.bucket_ms.size());
    if (K > 0 && v == 1 && s.resume_ms == 0 && f.allreduces == 1 && f.last_weight_grads_pc >= 0 &&
        f.last_compute_pc == f.last_weight_grads_pc && f.last_recv_pc < f.last_weight_grads_pc &&
        f.last_allreduce_pc > f.last_weight_grads_pc)
      exposed_ar_pc_[g] = f.last_allreduce_pc;
    for (int d = st.first_device; d < st.first_device + RunReplicas(st); ++d) {
      if (exposed_ar_pc_[g] >= 0) {
        const int j = d - st.first_device, R = st.replicas;
        exposure_[d] =
            BucketsLeftAfter(st.bucket_ms, [&](int k) { return st.bucket_ready_ms[k * R + j]; });
        tail_[d] += exposure_[d];
      }
      const EngineChunkCost* c = s.costs.data() + s.devices[d].first_cost;
      double w = f.steps * s.devices[d].step_ms +
                 (st.bucket_ms.empty() ? f.allreduces * st.allreduce_ms : 0.0);
      for (int k = 0; k < v; ++k)
        w += f.count[4 * k] * c[k].forward_ms + f.count[4 * k + 1] * c[k].backward_ms +
             f.count[4 * k + 2] * c[k].input_grad_ms + f.count[4 * k + 3] * c[k].weight_grad_ms;
      work_[d] = w + exposure_[d];
      const int last = f.last_backward_pc;
      if (last < 0) continue;
      last_cost_[d] = ListedCost(s, st, d, st.program[last]);
      for (int pc = last + 1; pc < st.length; ++pc)
        tail_[d] += ListedCost(s, st, d, st.program[pc]);
    }
  }
  // Stage g's last backward waits for the gradient of its micro-batch (received
  // before it), which stage g + 1 sends after its own last backward of that micro-batch.
  auto facts = [&](int g) -> const ListFacts& {
    return s.stages[g].facts ? *s.stages[g].facts : facts_[g];
  };
  for (int g = 0; g + 1 < S && v == 1; ++g) {
    const ListFacts &f = facts(g), &n = facts(g + 1);
    chained_[g] =
        f.last_backward_pc >= 0 && n.last_backward_pc >= 0 && f.last_recv_grad_pc >= 0 &&
        f.last_recv_grad_pc < f.last_backward_pc && f.last_recv_grad_mb == f.last_backward_mb &&
        n.last_backward_mb == f.last_backward_mb && n.last_send_grad_pc > n.last_backward_pc &&
        n.last_send_grad_mb == f.last_backward_mb;
  }
  watched_pc = last_backward_pc_;
}

double StopBound::Bound(const std::vector<DeviceState>& devices) const {
  const EngineSetup& s = *setup_;
  const int S = s.num_stages, V = S * s.num_chunks;
  double bound = 0;
  double arrival = -1;  // lower bound of when stage g's last gradient arrives; -1: none known
  for (int g = S - 1; g >= 0; --g) {
    const EngineStage& st = s.stages[g];
    double stage_end = 0;  // of the stage's last backward, on its slowest replica
    // Twins (Note [Twin replicas] in sim/event_engine.cc): the first replica stands for all.
    for (int d = st.first_device; d < st.first_device + RunReplicas(st); ++d) {
      const DeviceState& p = devices[d];
      const double left = work_[d] - p.done -
                          (exposed_ar_pc_[g] >= 0 && p.pc > exposed_ar_pc_[g] ? exposure_[d] : 0);
      bound = std::max(bound, p.clock + left);
      if (last_backward_pc_[g] < 0) continue;
      double end = p.last_backward_end >= 0 ? p.last_backward_end : p.clock + (left - tail_[d]);
      if (chained_[g] && arrival >= 0) end = std::max(end, arrival + last_cost_[d]);
      bound = std::max(bound, end + tail_[d]);
      stage_end = std::max(stage_end, end);
    }
    // The gradient to stage g - 1 leaves after the last backward of every replica of g.
    arrival = g > 0 && last_backward_pc_[g] >= 0 ? stage_end + s.routes[V - 1 + g - 1].ms : -1;
  }
  return bound;
}

}  // namespace dapple::internal
