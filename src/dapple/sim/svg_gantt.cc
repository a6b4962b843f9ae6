// SVG Gantt chart of one timeline (docs/schedules.md, "Timelines"): one row per track, one
// colour per category, a time axis in milliseconds and a legend.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "dapple/common/json_util.h"
#include "dapple/sim/timeline.h"

namespace dapple {
namespace {

constexpr double kLabelWidth = 260, kPlotWidth = 1000, kRowHeight = 18, kTop = 30;

struct Category {
  const char* name;
  const char* colour;
};
// "backward" is B, or I in the split schedules; "weight" is W.
constexpr Category kCategories[] = {{"forward", "#4e79a7"},   {"backward", "#59a14f"},
                                    {"weight", "#b07aa1"},    {"transfer", "#f28e2b"},
                                    {"allreduce", "#e15759"}, {"step", "#76b7b2"},
                                    {"other", "#bab0ac"}};

const char* ColourOf(const std::string& category) {
  for (const Category& c : kCategories)
    if (category == c.name) return c.colour;
  return kCategories[std::size(kCategories) - 1].colour;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A round tick step giving about `target` ticks over [0, span].
double TickStep(double span, int target) {
  double raw = span / target, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (raw <= f * p) return f * p;
  return 10 * p;
}

}  // namespace

std::string SvgGantt(const Timeline& t) {
  int rows = static_cast<int>(t.device_labels.size());
  double end = 0;
  for (const TimelineEvent& e : t.events) {
    rows = std::max(rows, e.device + 1);
    end = std::max(end, e.end_ms);
  }
  if (end <= 0) end = 1;
  const double scale = kPlotWidth / end;
  const double plot_bottom = kTop + rows * kRowHeight;
  const double height = plot_bottom + 70;
  const double width = kLabelWidth + kPlotWidth + 20;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"18\" font-size=\"14\">{}</text>\n",
      width, height, Escape(t.title));
  for (int r = 0; r < rows; ++r) {
    double y = kTop + r * kRowHeight;
    std::string label = r < static_cast<int>(t.device_labels.size()) ? t.device_labels[r]
                                                                     : fmt::format("track {}", r);
    out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                       kLabelWidth - 6, y + kRowHeight - 5, Escape(label));
    if (r % 2 == 1)
      out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f4f4f4\"/>\n",
                         kLabelWidth, y, kPlotWidth, kRowHeight);
  }
  for (const TimelineEvent& e : t.events) {
    double x = kLabelWidth + e.start_ms * scale;
    double w = std::max(0.5, (e.end_ms - e.start_ms) * scale);
    double y = kTop + e.device * kRowHeight + 2;
    out += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" "
        "stroke=\"white\" stroke-width=\"0.3\"><title>{} {:.3f}-{:.3f} ms</title></rect>\n",
        x, y, w, kRowHeight - 4, ColourOf(e.category), Escape(e.name), e.start_ms, e.end_ms);
  }
  // Time axis.
  const double step = TickStep(end, 10);
  out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n",
                     kLabelWidth, plot_bottom, kLabelWidth + kPlotWidth, plot_bottom);
  for (int i = 0; i * step <= end * (1 + 1e-9); ++i) {
    const double v = i * step, x = kLabelWidth + v * scale;
    out += fmt::format(
        "<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"black\"/>"
        "<text x=\"{0:.2f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
        x, plot_bottom, plot_bottom + 4, plot_bottom + 16, v);
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">time (ms)</text>\n",
                     kLabelWidth + kPlotWidth / 2, plot_bottom + 32);
  // Legend.
  double x = kLabelWidth;
  for (const Category& c : kCategories) {
    out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\">{}</text>\n",
        x, plot_bottom + 44, c.colour, x + 16, plot_bottom + 54, c.name);
    x += 100;
  }
  out += "</svg>\n";
  return out;
}

void WriteSvgGantt(const Timeline& timeline, const std::filesystem::path& path) {
  WriteFileAtomic(path, SvgGantt(timeline));
}

}  // namespace dapple
