// Chrome trace event JSON of timelines (docs/schedules.md, "Timelines").
#include <algorithm>

#include "dapple/common/json_util.h"
#include "dapple/sim/timeline.h"

namespace dapple {
namespace {

std::string TrackLabel(const Timeline& t, int track) {
  if (track >= 0 && track < static_cast<int>(t.device_labels.size())) return t.device_labels[track];
  return "track " + std::to_string(track);
}

}  // namespace

// One process per timeline (pid = its position + 1), one thread per track (tid = track
// index), named with the track's label and sorted by index; every event a complete ("X")
// event with ts and dur in microseconds.
std::string ChromeTraceJson(const std::vector<Timeline>& timelines) {
  Json events = Json::array();
  for (size_t i = 0; i < timelines.size(); ++i) {
    const Timeline& t = timelines[i];
    const int pid = static_cast<int>(i) + 1;
    events.push_back(
        {{"ph", "M"}, {"pid", pid}, {"name", "process_name"}, {"args", {{"name", t.title}}}});
    events.push_back({{"ph", "M"},
                      {"pid", pid},
                      {"name", "process_sort_index"},
                      {"args", {{"sort_index", pid}}}});
    int tracks = static_cast<int>(t.device_labels.size());
    for (const TimelineEvent& e : t.events) tracks = std::max(tracks, e.device + 1);
    for (int track = 0; track < tracks; ++track) {
      events.push_back({{"ph", "M"},
                        {"pid", pid},
                        {"tid", track},
                        {"name", "thread_name"},
                        {"args", {{"name", TrackLabel(t, track)}}}});
      events.push_back({{"ph", "M"},
                        {"pid", pid},
                        {"tid", track},
                        {"name", "thread_sort_index"},
                        {"args", {{"sort_index", track}}}});
    }
    for (const TimelineEvent& e : t.events) {
      Json args = Json::object();
      if (e.stage >= 0) args["stage"] = e.stage;
      if (e.micro_batch >= 0) args["micro_batch"] = e.micro_batch;
      events.push_back({{"ph", "X"},
                        {"pid", pid},
                        {"tid", e.device},
                        {"name", e.name},
                        {"cat", e.category},
                        {"ts", e.start_ms * 1000.0},
                        {"dur", std::max(0.0, e.end_ms - e.start_ms) * 1000.0},
                        {"args", std::move(args)}});
    }
  }
  Json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return doc.dump();
}

void WriteChromeTrace(const std::vector<Timeline>& timelines, const std::filesystem::path& path) {
  WriteFileAtomic(path, ChromeTraceJson(timelines));
}

}  // namespace dapple
