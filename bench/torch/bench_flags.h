// Minimal "--key value" flags for the torch measurement executables in bench/torch
// (they report figures for docs/models.md rather than microbenchmarks).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace dapple::bench {

// Flags as given: "--epochs 2" -> {"epochs", "2"}; exits with a message on a stray word.
inline std::map<std::string, std::string> ParseFlags(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; ++i) {
    std::string w = argv[i];
    if (w.rfind("--", 0) != 0 || i + 1 >= argc) {
      std::fprintf(stderr, "usage: %s [--key value ...]; bad word '%s'\n", argv[0], w.c_str());
      std::exit(2);
    }
    flags[w.substr(2)] = argv[++i];
  }
  return flags;
}

inline std::string Flag(const std::map<std::string, std::string>& f, const std::string& key,
                        const std::string& fallback) {
  auto it = f.find(key);
  return it == f.end() ? fallback : it->second;
}

}  // namespace dapple::bench
