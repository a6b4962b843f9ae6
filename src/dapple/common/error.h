// Errors of the dapple tools. User and input errors throw InputError (exit code 2),
// communication failures CommError; broken invariants use DAPPLE_CHECK.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace dapple {

// Base of every error the tools report; `main` catches it and prints what().
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input: a malformed or inconsistent file, an impossible request. Exit code 2.
// The message names the file, field or rank it is about.
class InputError : public Error {
 public:
  using Error::Error;
};

// Bad input that one process reports for all: the others exit with code 2 without a line of
// their own, so that the user reads it once.
class ReportedElsewhere : public InputError {
 public:
  using InputError::InputError;
};

// A peer died, stopped answering, or a collective failed.
class CommError : public Error {
 public:
  using Error::Error;
};

// Throws InputError with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void ThrowInput(fmt::format_string<Args...> f, Args&&... args) {
  throw InputError(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace dapple

// Invariant check: a failure is a bug in dapple, not in the input.
#define DAPPLE_CHECK(cond, ...)                                                        \
  do {                                                                                 \
    if (!(cond))                                                                       \
      throw ::dapple::Error(std::string("internal error: check failed: " #cond " at ") + \
                            __FILE__ + ":" + std::to_string(__LINE__) + " " +          \
                            std::string(__VA_ARGS__));                                 \
  } while (0)
