// Who proposed a plan the planner weighs, and what the choice of starts made of it
// (SelectStarts in refine/refine.h): the planner tells its starts apart by these fields, and
// plans and reports spell them as one name (Name).
#pragma once

#include <compare>
#include <ostream>
#include <string>
#include <utility>

namespace dapple {

struct Origin {
  // "dapple-dp", "dp", "straight", "pipedream", "even-widths", a schedule's name for the
  // chunked offers, "hand" in tests, ...
  std::string proposer;
  // The even-width pipelines over the servers in the order that leads with device kind
  // `kind_first` (Note [Even widths in every server order] in proposals.cc); -1: in id order.
  int kind_first = -1;
  bool recompute = false;  // SelectStarts' variant re-computing the stages that need it
  bool shard = false;      // made without the memory limit, fitting with sharded stages

  // Implicit: a proposer's name alone is an origin ({plan, "dp"}).
  Origin() = default;
  Origin(std::string p) : proposer(std::move(p)) {}
  Origin(const char* p) : proposer(p) {}
  Origin(std::string p, int kind) : proposer(std::move(p)), kind_first(kind) {}

  // "dapple-dp", "even-widths-A-first" (A: DeviceKindName), "pipedream+recompute",
  // "dp+shard".
  std::string Name() const;

  auto operator<=>(const Origin&) const = default;
  bool operator==(const Origin&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const Origin& o) { return os << o.Name(); }

}  // namespace dapple
