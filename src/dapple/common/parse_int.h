// Strict parsing of an integer given on the command line.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

namespace dapple {

// `text` as a base-10 int when the whole of it is one ("2", "-3", also " 2": std::stoi skips
// leading spaces); nullopt for "", "2x", "x" and numbers out of int's range.
inline std::optional<int> ParseWholeInt(const std::string& text) {
  size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size()) return std::nullopt;
  return v;
}

}  // namespace dapple
