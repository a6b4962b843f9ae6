// Internal to plan/: the V shapes' search beyond the winners' groups and shares (Note [V
// shapes searched] in v_search.cc): more device groups to cut into a V, and the re-cutting
// of a V plan's chunks one layer at a time.
#pragma once

#include <optional>
#include <vector>

#include "dapple/plan/proposals.h"
#include "dapple/plan/search/rescoring.h"

namespace dapple::internal {

// The V-shape schedules a call offers: the fixed schedule when it is one, all three when the
// DAPPLE planner searches schedules and may offer chunks, else none.
std::vector<ScheduleKind> OfferedVShapes(const PlannerOptions& o);

// Whether `c`'s V search is a small one (Note [V shapes searched]): a model of at most
// kSmallVLayers layers; it then also cuts MoreVBases. The fastest V proposal is re-cut when
// it is at most kReCutSlack slower than the winner (kReCutSlackLarge beyond kSmallVLayers).
inline constexpr int kSmallVLayers = 12;
inline constexpr double kReCutSlack = 0.25;
inline constexpr double kReCutSlackLarge = 0.10;
bool SmallVSearch(const Context& c);
// The most cuts of a V's layers into its chunks that its re-cutting tries every one of.
inline constexpr long long kEveryCutMost = 256;
// The most groups whose every order a small V search tries every cut on.
inline constexpr int kEveryOrderMost = 3;
// The work one re-cutting of a V may spend on simulations, in replicas x micro-batches of
// the plans simulated (Note [V shapes searched]).
inline constexpr long long kReCutWork = 200000;
// The most groups of a base whose variants without one group are cut into a V too.
inline constexpr int kDropMaxGroups = 8;

// More one-chunk plans to cut into a V at their own micro-batch size only (Note [V shapes
// searched]): `bases`' groups reordered and without one group, and the even-width pipelines
// of every micro-batch size the call made (Shared::even_widths,
// Shared::even_widths_by_order), each list of groups and size once and none of `bases`'.
std::vector<Plan> MoreVBases(const Context& c, const std::vector<Plan>& bases);

// The V plan `start` (scored) re-cut while that is faster: each round moves the boundary
// between two neighbouring chunks by one layer, every such move scored, and takes the
// fastest faster one; then the other V kinds on the final cut. Adds its simulations to
// *simulated.
Scored ReCutVShape(const Context& c, Scored start, long long* simulated);

// The fastest V of `proposals` that fits and beats `bar`, re-cut (ReCutVShape); nullopt when
// none. In a small V search (SmallVSearch) the fastest of each group count is re-cut, and
// where none of a count fits or beats `bar`, every cut of the fastest ignoring memory is
// tried (Note [V shapes searched]). Adds its simulations to *simulated.
std::optional<Scored> FastestVShape(const Context& c, const std::vector<Proposal>& proposals,
                                    double bar, long long* simulated);

}  // namespace dapple::internal
