// Runs independent work items on a few threads. The planner gathers what the items return
// in their index order, so its results do not depend on which thread finished first.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
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

namespace dapple {

// Tasks that may add tasks, run on a few threads: the planner's families pick their
// starts and then climb from each, and a family's climbs can run while another family still
// picks its starts. The caller gathers what the tasks compute by its own indices, so the
// results do not depend on which thread ran what.
class TaskPool {
 public:
  using Task = std::function<void(TaskPool&)>;
  // Queues `task`; among the waiting tasks a free thread takes the one of highest
  // priority (ties: the first added). Tasks may call it while the pool runs.
  void Add(long long priority, Task task) {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.push_back({priority, added_++, std::move(task)});
    std::push_heap(waiting_.begin(), waiting_.end(), Later);
    more_.notify_one();
  }
  // Runs every task (those queued and those they add) on up to `threads` threads (the
  // caller's among them; 0: the machine's cores) and returns when none is left. Rethrows
  // the first exception a task threw, after every thread stopped (the tasks still waiting
  // then are dropped).
  void Run(size_t threads) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back([this] { Work(); });
    Work();
    for (std::thread& t : pool) t.join();
    if (failure_) std::rethrow_exception(failure_);
  }

 private:
  struct Waiting {
    long long priority;
    long long added;
    Task task;
  };
  static bool Later(const Waiting& a, const Waiting& b) {
    return a.priority != b.priority ? a.priority < b.priority : a.added > b.added;
  }
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      more_.wait(lock, [&] { return !waiting_.empty() || running_ == 0 || failure_; });
      if (failure_ || waiting_.empty()) break;  // nothing left, and nothing running adds any
      std::pop_heap(waiting_.begin(), waiting_.end(), Later);
      Task task = std::move(waiting_.back().task);
      waiting_.pop_back();
      ++running_;
      lock.unlock();
      try {
        task(*this);
      } catch (...) {
        lock.lock();
        if (!failure_) failure_ = std::current_exception();
        lock.unlock();
      }
      lock.lock();
      --running_;
      more_.notify_all();  // a task may have ended the pool's work
    }
    more_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable more_;
  std::vector<Waiting> waiting_;  // a heap under Later
  long long added_ = 0;
  int running_ = 0;
  std::exception_ptr failure_;
};

}  // namespace dapple
