// What `dapple plan` prints (plan_cmd.cc): the plan as a table beside every other planner's
// figures, what each schedule family buys, and a planner's row as JSON.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dapple/common/json_util.h"
#include "dapple/cost/cost_model.h"
#include "dapple/format/cluster.h"
#include "dapple/format/profile.h"
#include "dapple/plan/plan_options.h"

namespace dapple {

// One line per planner of the comparison.
struct PlannerRow {
  std::string planner;
  std::optional<PlanResult> result;
  std::string skipped;  // why there is no result
};

// The plan of `r`, found by `planner`, as a table (stages, devices, servers, times, memory,
// the pivot stage marked), then one line per row of `rows` (the other planners).
void PrintTable(const std::string& planner, const Profile& profile, const Cluster& cluster,
                const CostModel& cost, const PlanResult& r, const std::vector<PlannerRow>& rows);

// What each schedule family buys: one line per row of `families`.
void PrintFamilies(const std::vector<PlannerRow>& families);

// A row as `dapple plan --json` prints it (its plan whole).
Json RowJson(const PlannerRow& row);

}  // namespace dapple
