#include "dapple/sim/timeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"
#include "dapple/sim/simulator.h"
#include "fakes/fake_cost_model.h"
#include "sim/sim_test_util.h"

namespace dapple {
namespace {

using ::testing::HasSubstr;

Timeline TwoByOneTimeline() {
  FakeCostModel cost(2, 3);
  cost.transfer_ms = 0.5;
  cost.allreduce_ms = 3;
  Plan plan = testing::MakePlan({{0, 0, {0, 1}}, {1, 1, {2}}}, 2, 2, ScheduleKind::kDappleA);
  plan.allreduce_overlap = false;  // one AR per replica, no bucket track
  return SimulatePlan(plan, cost).timeline;
}

int Count(const Json& events, const std::string& ph, const std::string& name = "") {
  int n = 0;
  for (const Json& e : events)
    if (e["ph"] == ph && (name.empty() || e["name"] == name)) ++n;
  return n;
}

TEST(ChromeTrace, ValidJsonWithOneCompleteEventPerTimelineEvent) {
  Timeline t = TwoByOneTimeline();
  Json doc = Json::parse(ChromeTraceJson({t}));
  const Json& events = doc["traceEvents"];
  // 2 x (F0 F1 B0 B1 AR STEP) + (F0 B0 F1 B1 STEP) + 4 transfers.
  EXPECT_EQ(Count(events, "X"), 21);
  EXPECT_EQ(Count(events, "M", "thread_name"), 5);  // 3 devices + 2 link tracks
  EXPECT_EQ(Count(events, "M", "process_name"), 1);
  bool found = false;
  for (const Json& e : events) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 3) {
      EXPECT_EQ(e["args"]["name"], "link stage 0 -> 1 (activations)");
    }
    if (e["ph"] == "X" && e["tid"] == 2 && e["name"] == "F0") {
      found = true;
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1500);  // microseconds
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 2000);
      EXPECT_EQ(e["cat"], "forward");
      EXPECT_EQ(e["args"]["micro_batch"], 0);
      EXPECT_EQ(e["args"]["stage"], 1);
    }
  }
  EXPECT_TRUE(found);
}

TEST(ChromeTrace, OneProcessPerTimeline) {
  Timeline a = TwoByOneTimeline(), b = a;
  b.title = "measured: \"quoted\" <x>";
  Json doc = Json::parse(ChromeTraceJson({a, b}));
  const Json& events = doc["traceEvents"];
  EXPECT_EQ(Count(events, "X"), 42);
  EXPECT_EQ(Count(events, "M", "process_name"), 2);
  std::set<int> pids;
  for (const Json& e : events) pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, (std::set<int>{1, 2}));
}

TEST(ChromeTrace, WritesAtomicallyAndFailsCleanly) {
  auto dir = std::filesystem::temp_directory_path() / "dapple_timeline_test";
  std::filesystem::create_directories(dir);
  Timeline t = TwoByOneTimeline();
  WriteChromeTrace({t}, dir / "t.json");
  EXPECT_EQ(Count(ReadJsonFile(dir / "t.json")["traceEvents"], "X"), 21);
  EXPECT_THROW(WriteChromeTrace({t}, dir / "missing-dir" / "t.json"), InputError);
  EXPECT_FALSE(std::filesystem::exists(dir / "missing-dir"));
  std::filesystem::remove_all(dir);
}

TEST(SvgGantt, OneRowPerTrackColoursAxisAndLegend) {
  Timeline t = TwoByOneTimeline();
  t.device_labels[0] = "dev <0> & co";
  std::string svg = SvgGantt(t);
  EXPECT_THAT(svg, HasSubstr("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
  EXPECT_THAT(svg, HasSubstr("dev &lt;0&gt; &amp; co"));
  EXPECT_THAT(svg, HasSubstr("link stage 1 -&gt; 0 (gradients)"));
  EXPECT_THAT(svg, HasSubstr("time (ms)"));
  for (const char* c : {"forward", "backward", "transfer", "allreduce", "step"})
    EXPECT_THAT(svg, HasSubstr(std::string(">") + c + "</text>"));
  size_t titles = 0;
  for (size_t p = svg.find("<title>"); p != std::string::npos; p = svg.find("<title>", p + 1))
    ++titles;
  EXPECT_EQ(titles, t.events.size());
  EXPECT_THAT(svg, HasSubstr("<title>F0 1.500-3.500 ms</title>"));

  auto path = std::filesystem::temp_directory_path() / "dapple_gantt_test.svg";
  WriteSvgGantt(t, path);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), svg);
  std::filesystem::remove(path);
}

TEST(SvgGantt, EmptyTimeline) {
  Timeline t;
  t.title = "nothing";
  std::string svg = SvgGantt(t);
  EXPECT_THAT(svg, HasSubstr("nothing"));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
}

}  // namespace
}  // namespace dapple
