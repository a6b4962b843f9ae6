// The search over several micro-batch sizes contains the search of each size alone (Note
// [Never slower than one micro-batch size] in size_searches.cc). Internal to plan/.
#pragma once

#include <functional>
#include <vector>

#include "dapple/plan/proposals.h"
#include "dapple/plan/search/rescoring.h"

namespace dapple::internal {

// The proposals RunPlanner searches among for `c`: Propose with the memory limit, less the
// plans whose message tags overflow the transport's range (*dropped_for_tags: some were).
std::vector<Proposal> RunnableProposals(const Context& c, bool* dropped_for_tags = nullptr);

// What RunPlanner's search does on a context: its proposals in (moved: the search splits
// them by schedule family), the selection out, the moves and families recorded in the result.
using SearchOf = std::function<Selection(const Context&, std::vector<Proposal>, PlanResult&)>;

// After `search` ran on `c` (its selection `sel`, its record `result`): runs `search` on
// every size of `c.sizes` alone, as RunPlanner with `micro_batch_size` set runs it, unless
// MicroBatchLowerBound proves it cannot find a plan faster than those recorded, and keeps
// the fastest plan (ties to the earlier: the search over every size, then the sizes
// ascending), for the whole search and for each schedule family. Nothing when `c` has one
// size or more than kEachSizeMaxDevices devices.
inline constexpr int kEachSizeMaxDevices = 12;
void SearchEachSize(const Context& c, const SearchOf& search, Selection& sel, PlanResult& result);

}  // namespace dapple::internal
