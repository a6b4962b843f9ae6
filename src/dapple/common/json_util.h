// Checked access to JSON fields: every failure names the file and the field path.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace dapple {

using Json = nlohmann::json;

// Parses `path` as JSON. Throws InputError naming the file (and the byte offset) on failure.
Json ReadJsonFile(const std::filesystem::path& path);

// Writes `text` to `path` atomically and durably: a temporary file in the same folder,
// fsync, rename, then fsync of the folder (Note [Durable writes]), so neither a failure nor
// a crash leaves a partial output file. Throws InputError when it cannot write.
void WriteFileAtomic(const std::filesystem::path& path, std::string_view text);
// Where a producer writes its bytes, in order.
using ByteSink = std::function<void(const char* data, size_t size)>;
// The same for bytes made as they are written: `produce` writes the whole file to the sink,
// so that a large file never sits in memory whole. An exception from `produce` removes the
// temporary file and propagates.
void WriteFileAtomic(const std::filesystem::path& path,
                     const std::function<void(const ByteSink&)>& produce);
// fsync of a folder, so that the entries created or renamed in it survive a crash. Throws
// InputError naming the folder.
void SyncDirectory(const std::filesystem::path& dir);

// A cursor into a JSON document that knows where it is ("plan.json: stages[2].devices").
class JsonField {
 public:
  JsonField(const Json& j, std::string where) : j_(j), where_(std::move(where)) {}

  const Json& json() const { return j_; }
  const std::string& where() const { return where_; }

  bool Has(std::string_view key) const;
  // The member `key`; throws InputError "<where>.<key>: missing" when absent.
  JsonField operator[](std::string_view key) const;
  JsonField operator[](size_t index) const;
  size_t size() const;  // REQUIRES: array (throws otherwise)

  std::string String() const;
  double Number() const;
  double NonNegative() const;  // a number >= 0
  double Positive() const;     // a number > 0
  int Int() const;             // an integral number
  int PositiveInt() const;     // an integral number > 0
  int NonNegativeInt() const;  // an integral number >= 0
  bool Bool() const;
  void ExpectArray() const;
  void ExpectObject() const;

  // Throws InputError "<where>: <message>".
  [[noreturn]] void Fail(std::string_view message) const;

 private:
  const Json& j_;
  std::string where_;
};

}  // namespace dapple
