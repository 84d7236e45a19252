#include "cli/simulate_chart.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "cli/format.h"
#include "cli/svg_chart.h"

namespace pacer::cli {
namespace {

constexpr double kCanvasWidth = 1000;
constexpr double kCanvasHeight = 420;
constexpr double kMarginLeft = 60;
constexpr double kMarginRight = 20;
constexpr double kMarginTop = 40;
constexpr double kMarginBottom = 50;

struct Band {
  double end_seconds;
  int offset;
  int gpus;
};

// The lowest offset where `gpus` rows are free among `active` bands.
int FirstFit(const std::vector<Band>& active, int gpus) {
  std::vector<std::pair<int, int>> used;
  for (const Band& b : active) used.emplace_back(b.offset, b.offset + b.gpus);
  std::sort(used.begin(), used.end());
  int offset = 0;
  for (const auto& [lo, hi] : used) {
    if (lo >= offset + gpus) break;
    offset = std::max(offset, hi);
  }
  return offset;
}

// A round tick step (1, 2, 5 x 10^k) giving about `count` ticks over `range`.
double TickStep(double range, int count) {
  const double raw = range / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

}  // namespace

std::string SimulationChartSvg(std::string_view title, const std::vector<sched::SimJob>& jobs,
                               const sched::SimResult& result, int cluster_gpus) {
  const double span_hours =
      std::max((result.end_seconds - result.start_seconds) / 3600.0, 1.0 / 60.0);
  // First-fit offsets; the y axis grows past the pool if bands fragment.
  std::vector<int> offsets(result.spans.size());
  std::vector<Band> active;
  int top = cluster_gpus;
  for (size_t i = 0; i < result.spans.size(); ++i) {
    const sched::AllocationSpan& s = result.spans[i];
    std::erase_if(active, [&](const Band& b) { return b.end_seconds <= s.start_seconds; });
    offsets[i] = FirstFit(active, s.gpus);
    active.push_back({s.end_seconds, offsets[i], s.gpus});
    top = std::max(top, offsets[i] + s.gpus);
  }
  const double plot_w = kCanvasWidth - kMarginLeft - kMarginRight;
  const double plot_h = kCanvasHeight - kMarginTop - kMarginBottom;
  auto x = [&](double seconds) {
    return kMarginLeft + (seconds - result.start_seconds) / 3600.0 / span_hours * plot_w;
  };
  auto y = [&](double gpus) { return kMarginTop + plot_h - gpus / top * plot_h; };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kCanvasWidth << "\" height=\""
      << kCanvasHeight << "\" viewBox=\"0 0 " << kCanvasWidth << ' ' << kCanvasHeight
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kCanvasWidth / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
      << XmlEscape(title) << "</text>\n";
  for (size_t i = 0; i < result.spans.size(); ++i) {
    const sched::AllocationSpan& s = result.spans[i];
    const double hue = std::fmod(static_cast<double>(s.job) * 137.508, 360.0);
    svg << "<rect x=\"" << FormatFixed(x(s.start_seconds), 2) << "\" y=\""
        << FormatFixed(y(offsets[i] + s.gpus), 2) << "\" width=\""
        << FormatFixed(std::max(x(s.end_seconds) - x(s.start_seconds), 0.3), 2) << "\" height=\""
        << FormatFixed(static_cast<double>(s.gpus) / top * plot_h, 2) << "\" fill=\"hsl("
        << FormatFixed(hue, 0) << ",60%,55%)\"><title>" << XmlEscape(jobs[s.job].id) << ": "
        << s.gpus << " GPUs, " << FormatFixed((s.start_seconds - result.start_seconds) / 3600.0, 2)
        << "–" << FormatFixed((s.end_seconds - result.start_seconds) / 3600.0, 2)
        << " h</title></rect>\n";
  }
  // Axes, ticks, pool line.
  svg << "<line x1=\"" << kMarginLeft << "\" y1=\"" << kMarginTop + plot_h << "\" x2=\""
      << kMarginLeft + plot_w << "\" y2=\"" << kMarginTop + plot_h << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << kMarginLeft << "\" y1=\"" << kMarginTop << "\" x2=\"" << kMarginLeft
      << "\" y2=\"" << kMarginTop + plot_h << "\" stroke=\"black\"/>\n";
  const double x_step = TickStep(span_hours, 10);
  for (double h = 0; h <= span_hours + 1e-9; h += x_step) {
    const double px = kMarginLeft + h / span_hours * plot_w;
    svg << "<line x1=\"" << FormatFixed(px, 2) << "\" y1=\"" << kMarginTop + plot_h << "\" x2=\""
        << FormatFixed(px, 2) << "\" y2=\"" << kMarginTop + plot_h + 5 << "\" stroke=\"black\"/>"
        << "<text x=\"" << FormatFixed(px, 2) << "\" y=\"" << kMarginTop + plot_h + 18
        << "\" text-anchor=\"middle\">" << FormatFixed(h, x_step < 1 ? 1 : 0) << "</text>\n";
  }
  const double y_step = TickStep(top, 8);
  for (double g = 0; g <= top + 1e-9; g += y_step) {
    svg << "<text x=\"" << kMarginLeft - 6 << "\" y=\"" << FormatFixed(y(g) + 4, 2)
        << "\" text-anchor=\"end\">" << FormatFixed(g, 0) << "</text>\n";
  }
  svg << "<line x1=\"" << kMarginLeft << "\" y1=\"" << FormatFixed(y(cluster_gpus), 2) << "\" x2=\""
      << kMarginLeft + plot_w << "\" y2=\"" << FormatFixed(y(cluster_gpus), 2)
      << "\" stroke=\"black\" stroke-dasharray=\"6 4\"><title>pool: " << cluster_gpus
      << " GPUs</title></line>\n"
      << "<text x=\"" << kMarginLeft + plot_w / 2 << "\" y=\"" << kCanvasHeight - 10
      << "\" text-anchor=\"middle\">hours since the first arrival</text>\n"
      << "<text x=\"16\" y=\"" << kMarginTop + plot_h / 2
      << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " << kMarginTop + plot_h / 2
      << ")\">GPUs per job</text>\n"
      << "</svg>\n";
  return svg.str();
}

}  // namespace pacer::cli
