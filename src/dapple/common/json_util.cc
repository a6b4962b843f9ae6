#include "dapple/common/json_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

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

void SyncDirectory(const std::filesystem::path& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    ThrowInput("{}: cannot open the folder to sync it: {}", dir.string(), std::strerror(errno));
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0) ThrowInput("{}: cannot sync the folder: {}", dir.string(), std::strerror(err));
}

void WriteFileAtomic(const std::filesystem::path& path, std::string_view text) {
  WriteFileAtomic(path, [text](const ByteSink& sink) { sink(text.data(), text.size()); });
}

namespace {

// Writes all of [p, p + size) to fd; false with errno set when it cannot.
bool WriteAll(int fd, const char* p, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void WriteFileAtomic(const std::filesystem::path& path,
                     const std::function<void(const ByteSink&)>& produce) {
  std::filesystem::path tmp = path;
  tmp += fmt::format(".tmp{}", static_cast<long>(getpid()));
  // Note [Durable writes]: the data reaches the disk (fsync) before the rename makes it
  // visible, and the folder's entry after it, so a crash leaves the old file or the
  // complete new one, never an empty or partial one under the final name.
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) ThrowInput("{}: cannot write file: {}", path.string(), std::strerror(errno));
  bool ok = true;
  int err = 0;
  std::error_code ec;
  try {
    produce([&](const char* data, size_t size) {
      if (ok && !WriteAll(fd, data, size)) {
        ok = false;
        err = errno;
      }
    });
  } catch (...) {
    close(fd);
    std::filesystem::remove(tmp, ec);
    throw;
  }
  if (ok && fsync(fd) != 0) {
    ok = false;
    err = errno;
  }
  if (close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::filesystem::remove(tmp, ec);
    ThrowInput("{}: write failed: {}", path.string(), std::strerror(err));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    ThrowInput("{}: cannot rename temporary file into place", path.string());
  }
  SyncDirectory(path.has_parent_path() ? path.parent_path() : std::filesystem::path("."));
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
  if (v != std::floor(v) || std::fabs(v) > 2e9)
    Fail(fmt::format("expected an integer (got {})", v));
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
