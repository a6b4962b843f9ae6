// Internal to the format layer: JSON text in and out, with errors that name the source.
#pragma once

#include <string>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"
#include "dapple/common/precision.h"

namespace dapple::format_internal {

// Parses `text`; throws InputError "<source>: malformed JSON at byte N" on failure.
inline Json ParseJsonText(const std::string& text, const std::string& source) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    ThrowInput("{}: malformed JSON at byte {}", source, e.byte);
  } catch (const Json::exception&) {  // e.g. out_of_range: a number beyond double
    ThrowInput("{}: malformed JSON: a number is out of range", source);
  }
}

// The whole file as a string; throws InputError when it cannot be read.
std::string ReadTextFile(const std::string& path);

// Checks the "format" member: present, a string, and equal to `expected`.
void ExpectFormat(const JsonField& root, const char* expected);

// A `precision` member of a profile or plan ("float32", "bf16"); Fail names the field otherwise.
Precision ReadPrecision(const JsonField& f);

}  // namespace dapple::format_internal
