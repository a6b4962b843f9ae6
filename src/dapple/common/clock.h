// The one clock of the runtime's timelines: milliseconds of steady_clock. Events recorded in
// different files (a bucket's launch, its completion on gloo's thread, the instructions) and
// in different processes of one machine are compared, so they must all read this clock.
#pragma once

#include <chrono>

namespace dapple {

inline double NowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace dapple
