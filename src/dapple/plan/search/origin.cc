// Origin's name: see origin.h.
#include "dapple/plan/search/origin.h"

#include "dapple/format/cluster_kinds.h"

namespace dapple {

std::string Origin::Name() const {
  std::string name = proposer;
  if (kind_first >= 0) name += "-" + DeviceKindName(static_cast<size_t>(kind_first)) + "-first";
  if (recompute) name += "+recompute";
  if (shard) name += "+shard";
  return name;
}

}  // namespace dapple
