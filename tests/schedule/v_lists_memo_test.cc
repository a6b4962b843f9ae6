// The shortcuts of v-half's and v-min's lists against the plain computation: the squeeze's
// order (Note [Squeeze order]) against a sort of the block's passes, the squeeze (its counts
// of a move's states from where it lands until they meet the old ones) against a squeeze that
// counts every trial list whole, and the lists kept once per shape (Note [V lists made once])
// against the lists made anew.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <deque>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "dapple/schedule/schedule.h"
#include "dapple/schedule/v_shape.h"

namespace dapple::internal {
namespace {

// The block's offsets of stage g as Note [V-Half and V-Min] states them.
std::array<int, 4> NoteOffsets(ScheduleKind kind, int S, int g) {
  if (kind == ScheduleKind::kVMin) {
    const int d = S % 3 == 0 ? 2 : 0;
    return {g, 2 * S - 1 - g, 2 * S + d + g, 4 * S - 1 + d - g};
  }
  const int d = S % 2 == 0 ? 3 : 0;
  return {2 * g, 3 * S - 2 - g, 3 * S - 1 + d + 2 * g, 6 * S - 2 + d - g};
}

std::string Shape(ScheduleKind kind, int S, int M) {
  return ToString(kind) + " S=" + std::to_string(S) + " M=" + std::to_string(M);
}

TEST(ControlledV, SqueezeOrderIsTheSortOfTheBlocksPasses) {
  for (ScheduleKind kind : {ScheduleKind::kVHalf, ScheduleKind::kVMin}) {
    for (int S = 1; S <= 12; ++S) {
      for (int M : {1, 2, S, 2 * S + 1, 5 * S + 3}) {
        std::vector<BlockPass> sorted;
        for (int g = 0; g < S; ++g) {
          const std::array<int, 4> offset = NoteOffsets(kind, S, g);
          for (int p = 0; p < 4; ++p)
            for (int n = 0; n < M; ++n) sorted.push_back({offset[p] + 6 * n, g, p, n});
        }
        std::sort(sorted.begin(), sorted.end(), [](const BlockPass& a, const BlockPass& b) {
          return std::tie(a.time, a.stage) < std::tie(b.time, b.stage);
        });
        const std::vector<BlockPass> order = BlockPasses(kind, S, M);
        ASSERT_EQ(order.size(), sorted.size()) << Shape(kind, S, M);
        for (size_t i = 0; i < order.size(); ++i) {
          const BlockPass &a = order[i], &b = sorted[i];
          ASSERT_EQ(std::tie(a.time, a.stage, a.pass, a.micro_batch),
                    std::tie(b.time, b.stage, b.pass, b.micro_batch))
              << Shape(kind, S, M) << " at " << i;
        }
      }
    }
  }
}

// Note [V-Half and V-Min]'s squeeze stated plainly: each pass, in the block's order, goes to the
// earliest free unit after what it depends on where its stage's whole list, counted anew, keeps
// within the cap (the block's largest peak); W's fill the free units, oldest first.
std::vector<std::vector<Instruction>> PlainSqueeze(ScheduleKind kind, int S, int M) {
  const std::vector<BlockPass> order = BlockPasses(kind, S, M);
  std::vector<std::vector<int>> units(S);  // [g][t]: pass * M + micro-batch, or -1
  std::vector<std::array<std::vector<int>, 4>> at(
      S, {std::vector<int>(M), std::vector<int>(M), std::vector<int>(M), std::vector<int>(M)});
  for (const BlockPass& x : order) {
    std::vector<int>& u = units[x.stage];
    if (static_cast<int>(u.size()) <= x.time) u.resize(x.time + 1 + 6 * S, -1);
    u[x.time] = x.pass * M + x.micro_batch;
    at[x.stage][x.pass][x.micro_batch] = x.time;
  }
  auto peak = [&](const std::vector<int>& u) {
    int held = 0, waiting = 0, top = 0;
    for (int v : u) {
      const int p = v < 0 ? -1 : v / M;
      if (p == 0 || p == 1) top = std::max(top, ++held);  // F0, F1
      if (p == 2 || p == 3) ++waiting;                    // I1, I0
      if (p < 0 && waiting > 0) --waiting, --held;        // a W
    }
    return top;
  };
  int cap = 0;
  for (const std::vector<int>& u : units) cap = std::max(cap, peak(u));
  for (const BlockPass& x : order) {
    const int g = x.stage, p = x.pass, n = x.micro_batch;
    int after = n > 0 ? at[g][p][n - 1] : -1;
    auto dep = [&](int stage, int pass) { after = std::max(after, at[stage][pass][n]); };
    if (p == 0 && g > 0) dep(g - 1, 0);                  // F0 after the previous stage's
    if (p == 1) g == S - 1 ? dep(g, 0) : dep(g + 1, 1);  // F1 after the next stage's
    if (p == 2) dep(g, 1), g > 0 ? dep(g - 1, 2) : void();
    if (p == 3) dep(g, 0), g == S - 1 ? dep(g, 2) : dep(g + 1, 3);
    const int from = at[g][p][n];
    for (int to = after + 1; to < from; ++to) {
      if (units[g][to] >= 0) continue;
      std::vector<int> trial = units[g];
      std::swap(trial[to], trial[from]);
      if (peak(trial) > cap) continue;
      units[g] = std::move(trial);
      at[g][p][n] = to;
      break;
    }
  }
  std::vector<std::vector<Instruction>> lists(S);
  for (int g = 0; g < S; ++g) {
    std::deque<Instruction> due;
    for (int v : units[g]) {
      const int p = v < 0 ? -1 : v / M, n = v < 0 ? 0 : v % M, chunk = p == 0 || p == 3 ? 0 : 1;
      if (p < 0) {
        if (!due.empty()) lists[g].push_back(due.front()), due.pop_front();
      } else if (p <= 1) {
        lists[g].push_back({Op::kForward, n, chunk});
      } else {
        lists[g].push_back({Op::kInputGrad, n, chunk});
        due.push_back({Op::kWeightGrad, n, chunk});
      }
    }
    lists[g].insert(lists[g].end(), due.begin(), due.end());
  }
  return lists;
}

TEST(ControlledV, SqueezeIsThePlainSqueeze) {
  for (ScheduleKind kind : {ScheduleKind::kVHalf, ScheduleKind::kVMin}) {
    for (int S = 1; S <= 7; ++S) {
      for (int M : {1, 2, S, 2 * S, 3 * S + 1}) {
        ASSERT_EQ(MakeControlledV(kind, S, M), PlainSqueeze(kind, S, M)) << Shape(kind, S, M);
      }
    }
  }
}

// Shapes asked in a random order, again and again, and past the memo's size (large shapes
// drop it): every answer is the lists made anew, and MakeSchedule's lists are the same.
TEST(ControlledV, KeptListsAreTheListsMadeAnew) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> stages(1, 16), micro_batches(1, 1000), coin(0, 1);
  std::vector<std::tuple<ScheduleKind, int, int>> asked;
  for (int i = 0; i < 50; ++i) {
    const ScheduleKind kind = coin(rng) ? ScheduleKind::kVHalf : ScheduleKind::kVMin;
    const ScheduleKind other =
        kind == ScheduleKind::kVHalf ? ScheduleKind::kVMin : ScheduleKind::kVHalf;
    const int S = stages(rng), M = micro_batches(rng) / (coin(rng) ? 1 : 20) + 1;
    // The shape and its neighbours, which a memo keyed on less than (kind, S, M) confuses.
    for (auto shape : {std::tuple{kind, S, M}, std::tuple{kind, S, M + 1}, std::tuple{other, S, M},
                       std::tuple{kind, S + 1, M}})
      asked.push_back(shape);
    if (coin(rng)) asked.push_back(asked[rng() % asked.size()]);
  }
  long long instructions = 0;  // 6SM a shape
  for (const auto& [kind, S, M] : asked) instructions += 6LL * S * M;
  ASSERT_GT(instructions, 2 << 20);  // twice what the memo keeps
  for (const auto& [kind, S, M] : asked) {
    const std::vector<std::vector<Instruction>> made = MakeControlledV(kind, S, M);
    ASSERT_EQ(*ControlledVLists(kind, S, M), made) << Shape(kind, S, M);
    ASSERT_EQ(MakeSchedule(kind, S, M, 2).programs, made) << Shape(kind, S, M);
    for (int g = 0; g < S; ++g) {
      int held = 0, peak = 0;
      for (const Instruction& in : made[g]) {
        if (in.op == Op::kForward) peak = std::max(peak, ++held);
        if (in.op == Op::kWeightGrad) --held;
      }
      ASSERT_EQ(PeakInFlight(kind, g, S, M), peak) << Shape(kind, S, M) << " stage " << g;
    }
  }
}

}  // namespace
}  // namespace dapple::internal
