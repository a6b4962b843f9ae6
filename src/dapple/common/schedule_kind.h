// The schedule families (docs/design.md section 3). Lives in common because both the plan
// format and the schedule generators name them.
#pragma once

#include <string>
#include <vector>

namespace dapple {

// kZbH1: zero bubble H1 (Qi et al., ICLR 2024): each backward split into I (input gradient)
// and W (weight gradient), W deferred into the bubbles (docs/schedules.md).
enum class ScheduleKind { kGPipe, kDappleA, kDappleB, kZbH1 };

std::string ToString(ScheduleKind k);  // "gpipe", "dapple-a", "dapple-b", "zb-h1"
// True for the kinds whose backward is split into I and W instructions.
bool SplitsBackward(ScheduleKind k);
// Throws InputError listing the known names.
ScheduleKind ParseScheduleKind(const std::string& s);
std::vector<ScheduleKind> AllScheduleKinds();

}  // namespace dapple
