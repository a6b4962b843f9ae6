// The compute precision of training and profiling (Note [Mixed precision] in
// models/mixed_precision.h). Lives in common because the profile and plan formats record it
// and the runtime, the profiler and the commands act on it.
#pragma once

#include <optional>
#include <string>

namespace dapple {

// kFloat32: every op computes in the model's own dtype (float32, or float64 with --dtype
// float64). kBf16: mixed precision, forward and loss under bfloat16 autocast over float32
// master weights.
enum class Precision { kFloat32, kBf16 };

// "float32", "bf16"
std::string ToString(Precision p);
// The precision named `s`, or nullopt.
std::optional<Precision> FindPrecision(const std::string& s);
// "unknown precision 'x' (known: float32, bf16)"
std::string UnknownPrecision(const std::string& s);
// FindPrecision, else InputError "--precision: " + UnknownPrecision(s).
Precision ParsePrecision(const std::string& s);

// bf16 computes over float32 master weights: InputError for kBf16 with a master dtype
// (`--dtype`) other than "float32".
void CheckMasterDtype(Precision p, const std::string& master_dtype);

}  // namespace dapple
