// A timeline of one iteration: what each device did when. Written by the simulator
// (predicted) and by the runtime (measured) in the same Chrome trace format, so both open
// side by side in Perfetto.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dapple {

struct TimelineEvent {
  int device = 0;    // track: one per device (rank)
  std::string name;  // instruction text: "F3", "B3", "I3", "W3", "SA3", "AR", "STEP"
  // "forward", "backward" (B or I), "weight" (W), "transfer", "allreduce", "step"
  std::string category;
  double start_ms = 0;
  double end_ms = 0;
  int stage = -1;
  int micro_batch = -1;
};

struct Timeline {
  std::string title;                       // "simulated: bert-48 on paper-a" / "measured: ..."
  std::vector<std::string> device_labels;  // per device: "dev 3 (stage 1, replica 0)"
  std::vector<TimelineEvent> events;
};

// Chrome trace event JSON (opens in Perfetto and chrome://tracing); one process per
// timeline so several (predicted, measured) can share one file; times in microseconds.
std::string ChromeTraceJson(const std::vector<Timeline>& timelines);
void WriteChromeTrace(const std::vector<Timeline>& timelines, const std::filesystem::path& path);
// SVG Gantt chart of one timeline: one row per device, one colour per category.
std::string SvgGantt(const Timeline& timeline);
void WriteSvgGantt(const Timeline& timeline, const std::filesystem::path& path);

}  // namespace dapple
