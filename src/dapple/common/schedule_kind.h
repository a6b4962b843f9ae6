// The schedule families (docs/design.md section 3). Lives in common because both the plan
// format and the schedule generators name them.
#pragma once

#include <string>
#include <vector>

namespace dapple {

enum class ScheduleKind { kGPipe, kDappleA, kDappleB };

std::string ToString(ScheduleKind k);  // "gpipe", "dapple-a", "dapple-b"
// Throws InputError listing the known names.
ScheduleKind ParseScheduleKind(const std::string& s);
std::vector<ScheduleKind> AllScheduleKinds();

}  // namespace dapple
