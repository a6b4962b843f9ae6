// A counting wrapper around libtorch's CPU allocator: see counting_allocator.h.
#include "dapple/profiler/counting_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "dapple/common/error.h"

namespace dapple {
namespace {

// Higher than libtorch's default CPU allocator, so SetCPUAllocator takes it (and takes
// the previous allocator back at the same priority).
constexpr uint8_t kPriority = 200;

std::atomic<int64_t> g_live{0};
std::atomic<bool> g_installed{false};

// The wrapped allocations by address. libtorch's raw_allocate requires the context of a
// DataPtr to be its data pointer, so the inner DataPtr lives here rather than in a context.
struct Allocation {
  c10::DataPtr inner;
  int64_t bytes;
};
std::mutex g_mu;
std::unordered_map<void*, Allocation>* g_allocations = new std::unordered_map<void*, Allocation>;

void Free(void* data) {
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_allocations->find(data);
    if (it == g_allocations->end()) return;  // cannot happen: only our DataPtrs call this
    a = std::move(it->second);
    g_allocations->erase(it);
  }
  g_live -= a.bytes;
  // a.inner frees through the inner allocator's deleter when it goes out of scope.
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = inner_->allocate(n);
    void* data = inner.get();
    c10::Device device = inner.device();
    if (data == nullptr) return inner;  // zero bytes
    {
      std::lock_guard<std::mutex> lock(g_mu);
      (*g_allocations)[data] = Allocation{std::move(inner), static_cast<int64_t>(n)};
    }
    g_live += static_cast<int64_t>(n);
    return {data, data, &Free, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    inner_->copy_data(dest, src, count);
  }

 private:
  c10::Allocator* inner_;
};

}  // namespace

ScopedAllocationCounter::ScopedAllocationCounter() : previous_(c10::GetCPUAllocator()) {
  DAPPLE_CHECK(!g_installed.exchange(true), "one ScopedAllocationCounter at a time");
  // Leaked on purpose: tensors allocated through it may outlive this scope.
  static CountingAllocator* counting = nullptr;
  static c10::Allocator* wrapped = nullptr;
  if (counting == nullptr || wrapped != previous_) {
    counting = new CountingAllocator(previous_);
    wrapped = previous_;
  }
  c10::SetCPUAllocator(counting, kPriority);
}

ScopedAllocationCounter::~ScopedAllocationCounter() {
  c10::SetCPUAllocator(previous_, kPriority);
  g_installed = false;
}

int64_t ScopedAllocationCounter::live_bytes() const { return g_live.load(); }

}  // namespace dapple
