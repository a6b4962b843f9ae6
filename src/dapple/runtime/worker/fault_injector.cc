// Faults injected by tests (Note [Fault injection], fault_injector.h).
#include "dapple/runtime/worker/fault_injector.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "dapple/common/error.h"

namespace dapple {
namespace {

const char* NonEmptyEnv(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

}  // namespace

FaultInjector FaultInjector::FromEnvironment(int rank, int attempt) {
  FaultInjector f;
  if (const char* v = NonEmptyEnv("DAPPLE_TEST_CHAOS")) {
    const std::string all = v;
    size_t begin = 0;
    for (int k = 0; begin <= all.size(); ++k) {
      size_t end = all.find(',', begin);
      if (end == std::string::npos) end = all.size();
      const std::string entry = all.substr(begin, end - begin);
      int r = -1;
      long long step = -1;
      if (std::sscanf(entry.c_str(), "%d:%lld", &r, &step) != 2)
        ThrowInput("DAPPLE_TEST_CHAOS={}: expected rank:step[:save],...", v);
      const bool save = entry.size() > 5 && entry.compare(entry.size() - 5, 5, ":save") == 0;
      if (k == attempt && r == rank) (save ? f.die_in_save_steps_ : f.die_at_step_) = step;
      begin = end + 1;
    }
  }
  if (const char* v = NonEmptyEnv("DAPPLE_TEST_DIE_IN_SAVE")) {
    int r = -1;
    long long steps = -1;
    if (std::sscanf(v, "%d:%lld", &r, &steps) != 2)
      ThrowInput("DAPPLE_TEST_DIE_IN_SAVE={}: expected rank:steps", v);
    if (r == rank) f.die_in_save_steps_ = steps;
  }
  if (const char* v = NonEmptyEnv("DAPPLE_TEST_DIE_AT")) {
    int r = -1, attempts = 1;
    long long step = -1;
    if (std::sscanf(v, "%d:%lld:%d", &r, &step, &attempts) < 2)
      ThrowInput("DAPPLE_TEST_DIE_AT={}: expected rank:step[:attempts]", v);
    // The first `attempts` starts only: a restarted job would otherwise die again and again.
    if (r == rank && attempt < attempts) f.die_at_step_ = step;
  }
  return f;
}

void FaultInjector::MidStep(int64_t step, size_t index, size_t count, const std::string& where,
                            const std::string& what) const {
  if (step != die_at_step_ || index != count / 2) return;
  std::fprintf(stderr, "%s, step %lld: test hook DAPPLE_TEST_DIE_AT: killing myself at %s\n",
               where.c_str(), static_cast<long long>(step), what.c_str());
  std::fflush(stderr);
  std::raise(SIGKILL);
}

void FaultInjector::AfterTraining(int64_t steps) const {
  if (steps == die_at_step_) std::raise(SIGKILL);
}

}  // namespace dapple
