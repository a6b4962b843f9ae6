// Message tags and their limit: see message_tags.h.
#include "dapple/format/message_tags.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace dapple {

int64_t MessageTag(int boundary, int direction, int micro_batch, int sender_rank, int receiver_rank,
                   int num_micro_batches, int world_size) {
  const int64_t w = world_size;
  return ((int64_t{boundary} * 2 + direction) * num_micro_batches + micro_batch) * w * w +
         int64_t{sender_rank} * w + receiver_rank;
}

int64_t MessageTagCount(int num_stages, int num_micro_batches, int world_size) {
  if (num_stages < 2) return 0;  // a single stage sends nothing
  const int64_t w = world_size;
  // Multiplied factor by factor, each below 2^31 and the running product below 2^31 before
  // each step, so nothing overflows int64; past the limit the count saturates at INT64_MAX.
  int64_t count = 2 * int64_t{num_stages - 1};
  for (int64_t f : {int64_t{std::max(num_micro_batches, 1)}, w, w}) {
    if (f >= kMessageTagLimit || count >= kMessageTagLimit)
      return std::numeric_limits<int64_t>::max();
    count *= f;
  }
  return count;
}

std::optional<std::string> MessageTagError(const Plan& plan, int world_size) {
  int64_t count = MessageTagCount(plan.num_stages(), plan.num_micro_batches, world_size);
  if (count <= kMessageTagLimit) return std::nullopt;
  return fmt::format(
      "num_micro_batches: {} stages x {} micro-batches on {} processes need {} message tags "
      "(2 x (stages - 1) x micro-batches x processes^2), more than the transport's 2^31; "
      "use fewer micro-batches, stages or processes",
      plan.num_stages(), plan.num_micro_batches, world_size,
      count == std::numeric_limits<int64_t>::max() ? std::string("far more")
                                                   : fmt::to_string(count));
}

}  // namespace dapple
