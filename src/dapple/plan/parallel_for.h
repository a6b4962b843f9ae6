// Runs independent work items on a few threads. The planner gathers what the items return
// in their index order, so its results do not depend on which thread finished first.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace dapple {

// Calls fn(i) for every i in [0, n) on up to `threads` threads (the caller's among them;
// 0: the machine's cores), each i once. Rethrows the first exception an item threw, after
// every thread stopped.
template <typename Fn>
void ParallelFor(size_t n, size_t threads, Fn&& fn) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, n);
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex mu;
  auto work = [&] {
    try {
      for (size_t i = next++; i < n; i = next++) fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace dapple
