// The serialized graph's nodes read into ExportNodes (Note [Exported programs run through the
// dispatcher] in exported_program.h): each target looked up in the dispatcher once, its
// arguments put in the schema's order.
#pragma once

#include <torch/csrc/utils/generated_serialization_types.h>

#include <map>
#include <string>

#include "dapple/models/exported_program.h"

namespace dapple::internal {

namespace ser = torch::_export;

// A serialized dtype as the model trains it (Note [Float dtypes follow the model]). Throws
// InputError naming `where` for a dtype dapple does not train.
c10::ScalarType DtypeOf(ser::ScalarType t, torch::Dtype model, const std::string& where);
// A size that must be fixed; throws InputError naming `where` for a symbolic one.
int64_t StaticInt(const ser::SymInt& s, const std::string& where);
// The value id of `name` in `g`, added when new.
int ValueId(ExportGraph* g, std::map<std::string, int>* ids, const std::string& name);

// Appends `graph`'s nodes to `g->nodes`. Throws InputError naming `file` and the node for an
// operation dapple cannot run (not an ATen operator, unknown to this libtorch, an argument
// of a kind it does not pass).
void ReadNodes(const ser::Graph& graph, ExportGraph* g, std::map<std::string, int>* ids,
               torch::Dtype dtype, const std::string& file);

}  // namespace dapple::internal
