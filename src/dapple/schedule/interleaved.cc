// Interleaved 1F1B (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM", SC'21): every device group runs v model chunks, so the fill
// and drain of the pipeline take v times shorter steps (docs/schedules.md).
#include "dapple/schedule/interleaved.h"

#include <algorithm>

#include "dapple/schedule/schedule.h"

namespace dapple::internal {

// Note [Interleaved 1F1B]: take the v*M (chunk, micro-batch) pairs in groups of S
// micro-batches. Stage s runs the forwards in the order: group 0's micro-batches 0..S-1 on
// chunk 0, the same on chunk 1, ..., on chunk v-1, then group 1 (micro-batches S..2S-1) on
// chunk 0, and so on; the backwards in the same order with the chunks reversed (v-1 first),
// since a micro-batch's backward goes down the chunks. Stage s runs
// K_s = min((v - 1)S + 2(S - s) - 1, vM) forwards (Megatron-LM's warm-up), then one backward
// and one forward alternately until the forwards run out, then the remaining backwards.
// (v - 1)S + 1 forwards let the last stage start its first backward (micro-batch 0 on chunk
// v-1) as soon as that forward ends; the 2(S - s) - 2 more on stage s are dapple-b's margin
// (Note [Warmup depth]): they keep forwards in flight while the gradients of the round trip
// to the last stage travel, so transfers between stages are hidden (with dapple-a's
// (v - 1)S + S - s, which also reaches the bubble below with free transfers, every chunk
// transfer lands on the critical path, and a deep pipeline can end slower than dapple-a).
// With one chunk the lists are dapple-b's. With F = B/2 per chunk and free
// transfers every stage idles (S - 1)(F + B) per iteration, 1/v of dapple-a's (and
// dapple-b's) on the same partition (tests/sim/interleaved_test.cc). Peak activation
// memory, in chunk-micro-batches: K_s, i.e. S + (S - 1)/v stage-micro-batches on stage 0,
// against dapple-a's S and dapple-b's 2S - 1.
int InterleavedWarmup(int stage, int num_stages, int num_micro_batches, int chunks) {
  return std::min((chunks - 1) * num_stages + 2 * (num_stages - stage) - 1,
                  chunks * num_micro_batches);
}

void AppendInterleaved(int stage, int num_stages, int num_micro_batches, int chunks,
                       std::vector<Instruction>& p) {
  const int S = num_stages, v = chunks, n = v * num_micro_batches;
  // The k-th forward (backward) of every stage: micro-batch and chunk.
  auto at = [&](int k, bool forward) {
    const int group = k / (S * v), in_group = k % (S * v);
    const int c = in_group / S;
    return Instruction{forward ? Op::kForward : Op::kBackward, group * S + in_group % S,
                       forward ? c : v - 1 - c};
  };
  const int k_s = InterleavedWarmup(stage, S, num_micro_batches, v);
  int f = 0, b = 0;
  while (f < k_s) p.push_back(at(f++, true));
  while (f < n) {
    p.push_back(at(b++, false));
    p.push_back(at(f++, true));
  }
  while (b < n) p.push_back(at(b++, false));
}

}  // namespace dapple::internal
