// Character-level text of the King James Bible from the Debian packages bible-kjv (the
// `bible` program) and bible-kjv-text (its compressed data). The text is extracted once
// with `bible -f` into the cache folder as one verse per line, references stripped, and
// mapped from there (Note [Data pages off the resident set] in file_bytes.h).
// Tokens are ASCII codes (vocabulary 128). Sample i is the window of T + 1 characters at
// offset i * T: inputs are its first T characters, targets the last T (next character).
// The last 5% of the windows are the test split.
#include <cstdio>

#include "dapple/common/error.h"
#include "dapple/models/data_internal.h"

namespace dapple::internal {
namespace {

constexpr char kProgram[] = "/usr/bin/bible";
constexpr char kDataDir[] = "/usr/lib";
constexpr int64_t kVocab = 128;

std::string ExtractText() {
  if (!std::filesystem::exists(kProgram))
    ThrowInput("kjv: {} missing; install the Debian package bible-kjv", kProgram);
  if (!std::filesystem::exists(std::filesystem::path(kDataDir) / "bible.data"))
    ThrowInput("kjv: {}/bible.data missing; install the Debian package bible-kjv-text", kDataDir);
  // fmt rather than string concatenation: GCC 12 at -O2 warns (-Warray-bounds, a false
  // positive) on the inlined appends.
  std::string cmd = fmt::format("{} -f -p {} gen1:1-rev22:21 </dev/null", kProgram, kDataDir);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) ThrowInput("kjv: cannot run {}", kProgram);
  std::string text;
  char* line = nullptr;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, pipe)) > 0) {
    std::string_view verse(line, len);
    auto space = verse.find(' ');  // "Ge1:1 In the beginning ..."
    if (space == std::string_view::npos) continue;
    text.append(verse.substr(space + 1));
  }
  free(line);
  int status = pclose(pipe);
  if (status != 0 || text.size() < 1000000)
    ThrowInput(
        "kjv: {} failed (status {}); reinstall the Debian packages bible-kjv and "
        "bible-kjv-text",
        kProgram, status);
  return text;
}

}  // namespace

std::unique_ptr<Dataset> MakeKjv(const Model& model, uint64_t seed,
                                 const std::filesystem::path& cache_dir, DataParts parts) {
  if (model.input_dtype != torch::kInt64 || model.input_shape.size() != 1 ||
      model.target_shape != model.input_shape)
    ThrowInput(
        "kjv needs a language model (token sequence in, next tokens out); model {} "
        "is not one",
        model.name);
  if (model.vocab_size < kVocab || model.num_classes < kVocab)
    ThrowInput("kjv needs a vocabulary of at least {} (ASCII); model {} has {}", kVocab, model.name,
               model.vocab_size);
  int64_t t = model.input_shape[0];
  std::shared_ptr<FileBytes> text = CachedFileBytes(cache_dir / "kjv", "kjv.txt", ExtractText);
  torch::Tensor chars = text->View(0, {text->size()});
  int64_t windows = (chars.size(0) - 1) / t;
  if (windows < 20) ThrowInput("kjv: sequence length {} too long for the text", t);
  torch::Tensor all = chars.slice(0, 0, windows * t + 1);
  torch::Tensor inputs = all.slice(0, 0, windows * t).view({windows, t});
  torch::Tensor targets = all.slice(0, 1, windows * t + 1).view({windows, t});
  int64_t train = windows - windows / 20;
  auto wanted = [](bool want, const torch::Tensor& x) { return want ? x : torch::Tensor(); };
  Batch train_set{wanted(parts.inputs, inputs.slice(0, 0, train)),
                  wanted(parts.targets, targets.slice(0, 0, train))};
  Batch test_set{wanted(parts.inputs, inputs.slice(0, train)),
                 wanted(parts.targets, targets.slice(0, train))};
  RowFormat format;
  format.inputs = format.targets = [](const torch::Tensor& bytes) {
    return bytes.bitwise_and(0x7f).to(torch::kLong);
  };
  format.files = {text};
  return std::make_unique<InMemoryDataset>(std::move(train_set), std::move(test_set), seed,
                                           /*shuffle=*/true, std::move(format));
}

}  // namespace dapple::internal
