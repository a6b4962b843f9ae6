// Lines of a command's output, for the tests that run one.
#pragma once

#include <string>

namespace dapple::testing {

// The number of newlines in `s`.
inline int Lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace dapple::testing
