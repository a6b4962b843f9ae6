#include "dapple/common/precision.h"

#include "dapple/common/error.h"

namespace dapple {

std::string ToString(Precision p) {
  switch (p) {
    case Precision::kFloat32:
      return "float32";
    case Precision::kBf16:
      return "bf16";
  }
  return "?";
}

std::optional<Precision> FindPrecision(const std::string& s) {
  for (Precision p : {Precision::kFloat32, Precision::kBf16})
    if (ToString(p) == s) return p;
  return std::nullopt;
}

std::string UnknownPrecision(const std::string& s) {
  return fmt::format("unknown precision '{}' (known: float32, bf16)", s);
}

Precision ParsePrecision(const std::string& s) {
  if (auto p = FindPrecision(s)) return *p;
  ThrowInput("--precision: {}", UnknownPrecision(s));
}

void CheckMasterDtype(Precision p, const std::string& master_dtype) {
  if (p == Precision::kBf16 && master_dtype != "float32")
    ThrowInput(
        "--precision bf16 keeps float32 master weights: it cannot be combined with --dtype {}",
        master_dtype);
}

}  // namespace dapple
