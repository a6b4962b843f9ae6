// TaskPool (plan/parallel_for.h): every task runs once, tasks added by tasks included; one
// thread takes the highest priority first (ties: the first added); an exception reaches Run.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "dapple/plan/parallel_for.h"

namespace dapple {
namespace {

TEST(TaskPool, RunsEveryTaskOnceWithThoseTasksAdd) {
  for (size_t threads : {1u, 2u, 4u}) {
    std::vector<std::atomic<int>> ran(40);
    TaskPool pool;
    for (int t = 0; t < 4; ++t)
      pool.Add(0, [&, t](TaskPool& p) {
        ++ran[t];
        for (int k = 1; k < 10; ++k) p.Add(k, [&, t, k](TaskPool&) { ++ran[4 + t * 9 + k - 1]; });
      });
    pool.Run(threads);
    for (size_t i = 0; i < ran.size(); ++i) EXPECT_EQ(ran[i].load(), 1) << i << ", " << threads;
  }
}

TEST(TaskPool, OneThreadTakesTheHighestPriorityFirst) {
  std::vector<int> order;
  TaskPool pool;
  pool.Add(1, [&](TaskPool& p) {
    order.push_back(1);
    p.Add(5, [&](TaskPool&) { order.push_back(5); });
    p.Add(0, [&](TaskPool&) { order.push_back(0); });
    p.Add(5, [&](TaskPool&) { order.push_back(6); });  // a tie: after the first 5
  });
  pool.Add(3, [&](TaskPool&) { order.push_back(3); });
  pool.Add(2, [&](TaskPool&) { order.push_back(2); });
  pool.Run(1);
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1, 5, 6, 0}));
}

TEST(TaskPool, RethrowsATasksException) {
  TaskPool pool;
  std::atomic<int> ran{0};
  for (int t = 0; t < 6; ++t)
    pool.Add(0, [&, t](TaskPool&) {
      ++ran;
      if (t == 2) throw std::runtime_error("task 2 failed");
    });
  EXPECT_THROW(pool.Run(2), std::runtime_error);
  EXPECT_GE(ran.load(), 3);
}

}  // namespace
}  // namespace dapple
