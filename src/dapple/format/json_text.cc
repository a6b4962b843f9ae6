#include "dapple/format/json_text.h"

#include <fstream>
#include <sstream>

namespace dapple::format_internal {

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ThrowInput("{}: cannot open file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) ThrowInput("{}: cannot read file", path);
  return ss.str();
}

void ExpectFormat(const JsonField& root, const char* expected) {
  root.ExpectObject();
  std::string got = root["format"].String();
  if (got != expected)
    root["format"].Fail(fmt::format("expected \"{}\", got \"{}\"", expected, got));
}

Precision ReadPrecision(const JsonField& f) {
  const std::string name = f.String();
  if (auto p = FindPrecision(name)) return *p;
  f.Fail(UnknownPrecision(name));
}

}  // namespace dapple::format_internal
