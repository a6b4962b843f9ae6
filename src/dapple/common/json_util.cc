#include "dapple/common/json_util.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "dapple/common/error.h"

namespace dapple {

Json ReadJsonFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) ThrowInput("{}: cannot open file", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return Json::parse(ss.str());
  } catch (const Json::parse_error& e) {
    ThrowInput("{}: malformed JSON at byte {}", path.string(), e.byte);
  } catch (const Json::exception&) {  // e.g. out_of_range: a number beyond double
    ThrowInput("{}: malformed JSON: a number is out of range", path.string());
  }
}

void WriteFileAtomic(const std::filesystem::path& path, std::string_view text) {
  std::filesystem::path tmp = path;
  tmp += fmt::format(".tmp{}", static_cast<long>(getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) ThrowInput("{}: cannot write file", path.string());
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      ThrowInput("{}: write failed", path.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    ThrowInput("{}: cannot rename temporary file into place", path.string());
  }
}

bool JsonField::Has(std::string_view key) const {
  return j_.is_object() && j_.contains(key) && !j_.at(std::string(key)).is_null();
}

JsonField JsonField::operator[](std::string_view key) const {
  ExpectObject();
  auto it = j_.find(std::string(key));
  if (it == j_.end() || it->is_null()) ThrowInput("{}.{}: missing", where_, key);
  return JsonField(*it, fmt::format("{}.{}", where_, key));
}

JsonField JsonField::operator[](size_t index) const {
  ExpectArray();
  if (index >= j_.size()) ThrowInput("{}[{}]: missing", where_, index);
  return JsonField(j_[index], fmt::format("{}[{}]", where_, index));
}

size_t JsonField::size() const {
  ExpectArray();
  return j_.size();
}

std::string JsonField::String() const {
  if (!j_.is_string()) Fail("expected a string");
  return j_.get<std::string>();
}

double JsonField::Number() const {
  if (!j_.is_number()) Fail("expected a number");
  double v = j_.get<double>();
  if (!std::isfinite(v)) Fail("expected a finite number");
  return v;
}

double JsonField::NonNegative() const {
  double v = Number();
  if (v < 0) Fail(fmt::format("must not be negative (got {})", v));
  return v;
}

double JsonField::Positive() const {
  double v = Number();
  if (v <= 0) Fail(fmt::format("must be positive (got {})", v));
  return v;
}

int JsonField::Int() const {
  double v = Number();
  if (v != std::floor(v) || std::fabs(v) > 2e9) Fail(fmt::format("expected an integer (got {})", v));
  return static_cast<int>(v);
}

int JsonField::PositiveInt() const {
  int v = Int();
  if (v <= 0) Fail(fmt::format("must be positive (got {})", v));
  return v;
}

int JsonField::NonNegativeInt() const {
  int v = Int();
  if (v < 0) Fail(fmt::format("must not be negative (got {})", v));
  return v;
}

bool JsonField::Bool() const {
  if (!j_.is_boolean()) Fail("expected true or false");
  return j_.get<bool>();
}

void JsonField::ExpectArray() const {
  if (!j_.is_array()) Fail("expected an array");
}

void JsonField::ExpectObject() const {
  if (!j_.is_object()) Fail("expected an object");
}

void JsonField::Fail(std::string_view message) const {
  throw InputError(fmt::format("{}: {}", where_, message));
}

}  // namespace dapple
