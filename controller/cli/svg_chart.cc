#include "cli/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "cli/format.h"
#include "pacer/planner/units.h"

namespace pacer::cli {
namespace {

// Canvas and plot area, in SVG user units (pixels).
constexpr double kWidth = 900;
constexpr double kHeight = 520;
constexpr double kLeft = 90;
constexpr double kRight = 810;
constexpr double kTop = 80;
constexpr double kBottom = 450;
constexpr int kMaxLabelledPoints = 12;

constexpr const char* kTimeColor = "#1f77b4";
constexpr const char* kGpuHoursColor = "#ff7f0e";
constexpr const char* kDeadlineColor = "#d62728";

std::string Num(double x) { return FormatFixed(x, 1); }

// A "nice" tick step (1, 2 or 5 x 10^k) giving about five ticks up to `max`.
double NiceStep(double max) {
  if (!(max > 0)) return 1;
  const double raw = max / 5;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

// Tick labels without trailing zeros: 0.5, 2, 1,500.
std::string TickLabel(double value, double step) {
  if (step >= 1) return FormatGrouped(value);
  const int decimals = static_cast<int>(std::ceil(-std::log10(step)));
  return FormatFixed(value, decimals);
}

struct Axis {
  bool log = false;
  double min = 0;   // the bottom of the axis (log axes only; linear ones start at 0)
  double max = 1;   // the top of the axis, in the axis' unit
  double step = 1;  // tick spacing (linear axes)
  double Y(double value) const {
    if (log) {
      const double v = std::max(value, min);
      return kBottom - (std::log10(v / min) / std::log10(max / min)) * (kBottom - kTop);
    }
    return kBottom - (value / max) * (kBottom - kTop);
  }
  // Tick values: multiples of `step` (linear), or 1, 2 and 5 x 10^k (log).
  std::vector<double> Ticks() const {
    std::vector<double> ticks;
    if (log) {
      // An infinite top (a plan of "forever") would never end the loop.
      if (!(min > 0) || !std::isfinite(max)) return ticks;
      for (double power = std::pow(10.0, std::floor(std::log10(min))); power <= max; power *= 10) {
        for (double m : {1.0, 2.0, 5.0}) {
          if (m * power >= min * 0.999 && m * power <= max * 1.001) ticks.push_back(m * power);
        }
      }
      return ticks;
    }
    // From an integer index, so that the values do not drift (0.1 + 0.2).
    for (int i = 0; i * step <= max + step / 2; ++i) ticks.push_back(i * step);
    return ticks;
  }
};

Axis MakeAxis(double data_max) {
  // 5% headroom so that the highest point or the deadline never sits on the
  // plot's top edge.
  const double top = data_max * 1.05;
  Axis axis;
  axis.step = NiceStep(top);
  axis.max = std::max(axis.step, std::ceil(top / axis.step) * axis.step);
  return axis;
}

// A log axis from the decade-ish value below `data_min` to the one above
// `data_max`, rounded out to 1, 2 or 5 x 10^k.
Axis MakeLogAxis(double data_min, double data_max) {
  auto round_down = [](double v) {
    const double power = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {5.0, 2.0, 1.0}) {
      if (m * power <= v) return m * power;
    }
    return power;
  };
  auto round_up = [](double v) {
    const double power = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
      if (m * power >= v) return m * power;
    }
    return 10 * power;
  };
  Axis axis;
  axis.log = true;
  axis.min = round_down(data_min * 0.95);
  axis.max = round_up(data_max * 1.05);
  return axis;
}

// Seconds in the unit that reads best for times up to `max_seconds`.
struct TimeUnit {
  double seconds;
  const char* name;
};
TimeUnit TimeUnitFor(double max_seconds) {
  if (max_seconds > 96 * 3600.0) return {86400, "days"};
  if (max_seconds < 3 * 3600.0) return {60, "minutes"};
  return {3600, "hours"};
}

// The plan `pacer plan` would choose among the swept counts: the cheapest
// (by cost when priced, else GPU-hours) or the fastest that meets the
// deadline. Index into `points`, or -1.
int ChosenPoint(const std::vector<planner::SweepPoint>& points, planner::Objective objective) {
  int chosen = -1;
  auto key = [&](const planner::Evaluation& e) {
    if (objective == planner::Objective::kTime) return e.total.total_seconds;
    return e.cost > 0 ? e.cost : e.gpu_hours;
  };
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!points[i].best || !points[i].meets_deadline) continue;
    if (chosen < 0 || key(*points[i].best) < key(*points[static_cast<std::size_t>(chosen)].best)) {
      chosen = static_cast<int>(i);
    }
  }
  return chosen;
}

}  // namespace

std::string XmlEscape(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&apos;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

std::string SweepChartSvg(std::string_view job_name, const std::vector<planner::SweepPoint>& points,
                          std::optional<double> deadline_seconds,
                          const SweepChartContext& context) {
  double max_seconds = deadline_seconds.value_or(0);
  double min_seconds = deadline_seconds.value_or(0);
  double max_right = 0;
  int min_gpus = 0;
  int max_gpus = 0;
  bool priced = false;
  bool any_plan = false;
  std::vector<std::string> gpu_types;
  for (const planner::SweepPoint& p : points) {
    min_gpus = min_gpus == 0 ? p.gpus : std::min(min_gpus, p.gpus);
    max_gpus = std::max(max_gpus, p.gpus);
    if (!p.best) continue;
    const double t = p.best->total.total_seconds;
    max_seconds = std::max(max_seconds, t);
    min_seconds = (!any_plan && !deadline_seconds) ? t : std::min(min_seconds, t);
    priced = any_plan ? priced && p.best->cost > 0 : p.best->cost > 0;
    any_plan = true;
    if (std::find(gpu_types.begin(), gpu_types.end(), p.best->layout.gpu_type) == gpu_types.end()) {
      gpu_types.push_back(p.best->layout.gpu_type);
    }
  }
  // The right axis: money when every plan has a price, GPU-hours otherwise.
  auto right_value = [priced](const planner::Evaluation& e) {
    return priced ? e.cost : e.gpu_hours;
  };
  for (const planner::SweepPoint& p : points) {
    if (p.best) max_right = std::max(max_right, right_value(*p.best));
  }
  const char* right_series = priced ? "cost" : "gpu-hours";
  const char* right_title = priced ? "Cost" : "GPU-hours";
  const TimeUnit unit = TimeUnitFor(max_seconds);
  // A wide range (a 1-GPU month next to a 1,024-GPU hour) flattens every
  // point but the first on a linear axis: a log axis keeps them apart.
  const bool log_time = min_seconds > 0 && max_seconds / min_seconds > 20;
  const Axis time_axis = log_time
                             ? MakeLogAxis(min_seconds / unit.seconds, max_seconds / unit.seconds)
                             : MakeAxis(max_seconds / unit.seconds);
  const Axis right_axis = MakeAxis(max_right);
  const double time_unit_seconds = unit.seconds;
  const int chosen = ChosenPoint(points, context.objective);

  double x_lo = std::log2(std::max(min_gpus, 1));
  double x_hi = std::log2(std::max(max_gpus, 1));
  if (x_hi - x_lo < 1e-9) {  // one GPU count: centre it
    x_lo -= 1;
    x_hi += 1;
  }
  // A little room so that the first and last markers do not sit on the axes.
  const double x_pad = (x_hi - x_lo) * 0.04;
  x_lo -= x_pad;
  x_hi += x_pad;
  auto x_of = [&](int gpus) {
    return kLeft + (std::log2(gpus) - x_lo) / (x_hi - x_lo) * (kRight - kLeft);
  };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Num(kWidth) << "\" height=\""
      << Num(kHeight) << "\" viewBox=\"0 0 " << Num(kWidth) << " " << Num(kHeight)
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "  <rect x=\"0\" y=\"0\" width=\"" << Num(kWidth) << "\" height=\"" << Num(kHeight)
      << "\" fill=\"white\"/>\n";
  svg << "  <text x=\"" << Num(kWidth / 2) << "\" y=\"30\" text-anchor=\"middle\" font-size=\"16\""
      << " font-weight=\"bold\">" << XmlEscape(job_name) << ": predicted total time and "
      << (priced ? "cost" : "GPU-hours") << " by GPU count</text>\n";

  // Grid and ticks.
  svg << "  <g class=\"axes\" stroke=\"#444\">\n";
  svg << "    <line x1=\"" << Num(kLeft) << "\" y1=\"" << Num(kBottom) << "\" x2=\"" << Num(kRight)
      << "\" y2=\"" << Num(kBottom) << "\"/>\n";
  svg << "    <line x1=\"" << Num(kLeft) << "\" y1=\"" << Num(kTop) << "\" x2=\"" << Num(kLeft)
      << "\" y2=\"" << Num(kBottom) << "\"/>\n";
  svg << "    <line x1=\"" << Num(kRight) << "\" y1=\"" << Num(kTop) << "\" x2=\"" << Num(kRight)
      << "\" y2=\"" << Num(kBottom) << "\"/>\n";
  svg << "  </g>\n";

  svg << "  <g class=\"x-ticks\" text-anchor=\"middle\">\n";
  std::vector<int> x_ticks;
  if (points.size() <= static_cast<std::size_t>(kMaxLabelledPoints)) {
    for (const planner::SweepPoint& p : points) x_ticks.push_back(p.gpus);
  } else {
    for (int64_t g = 1; g <= max_gpus; g *= 2) {
      if (g >= min_gpus) x_ticks.push_back(static_cast<int>(g));
    }
  }
  for (int gpus : x_ticks) {
    const double x = x_of(gpus);
    svg << "    <line x1=\"" << Num(x) << "\" y1=\"" << Num(kBottom) << "\" x2=\"" << Num(x)
        << "\" y2=\"" << Num(kBottom + 5) << "\" stroke=\"#444\"/>\n";
    svg << "    <text x=\"" << Num(x) << "\" y=\"" << Num(kBottom + 20) << "\">" << gpus
        << "</text>\n";
  }
  svg << "  </g>\n";

  svg << "  <g class=\"y-ticks\">\n";
  for (double v : time_axis.Ticks()) {
    const double y = time_axis.Y(v);
    svg << "    <line x1=\"" << Num(kLeft) << "\" y1=\"" << Num(y) << "\" x2=\"" << Num(kRight)
        << "\" y2=\"" << Num(y) << "\" stroke=\"#e5e5e5\"/>\n";
    svg << "    <text x=\"" << Num(kLeft - 8) << "\" y=\"" << Num(y + 4)
        << "\" text-anchor=\"end\" fill=\"" << kTimeColor << "\">"
        << (time_axis.log ? TickLabel(v, std::min(v, 1.0)) : TickLabel(v, time_axis.step))
        << "</text>\n";
  }
  for (double v : right_axis.Ticks()) {
    svg << "    <text x=\"" << Num(kRight + 8) << "\" y=\"" << Num(right_axis.Y(v) + 4)
        << "\" text-anchor=\"start\" fill=\"" << kGpuHoursColor << "\">"
        << TickLabel(v, right_axis.step) << "</text>\n";
  }
  svg << "  </g>\n";

  // Axis titles.
  std::string types;
  for (const std::string& t : gpu_types) types += (types.empty() ? "" : ", ") + t;
  svg << "  <text x=\"" << Num((kLeft + kRight) / 2) << "\" y=\"" << Num(kBottom + 45)
      << "\" text-anchor=\"middle\">" << (types.empty() ? "" : XmlEscape(types) + " ")
      << "GPUs (log2 scale)</text>\n";
  svg << "  <text transform=\"translate(" << Num(kLeft - 60) << " " << Num((kTop + kBottom) / 2)
      << ") rotate(-90)\" text-anchor=\"middle\" fill=\"" << kTimeColor
      << "\">Predicted total time (" << unit.name << (time_axis.log ? ", log scale" : "")
      << ")</text>\n";
  svg << "  <text transform=\"translate(" << Num(kRight + 70) << " " << Num((kTop + kBottom) / 2)
      << ") rotate(90)\" text-anchor=\"middle\" fill=\"" << kGpuHoursColor << "\">" << right_title
      << "</text>\n";

  // The deadline.
  if (deadline_seconds) {
    const double y = time_axis.Y(*deadline_seconds / time_unit_seconds);
    svg << "  <g class=\"deadline\">\n";
    svg << "    <line x1=\"" << Num(kLeft) << "\" y1=\"" << Num(y) << "\" x2=\"" << Num(kRight)
        << "\" y2=\"" << Num(y) << "\" stroke=\"" << kDeadlineColor
        << "\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n";
    svg << "    <text x=\"" << Num(kRight - 6) << "\" y=\"" << Num(y - 6)
        << "\" text-anchor=\"end\" fill=\""
        << kDeadlineColor
        // A white halo keeps the label readable where a curve crosses it.
        << "\" stroke=\"white\" stroke-width=\"4\" paint-order=\"stroke\">deadline"
        << (context.deadline_unix_seconds
                ? " " + planner::FormatRfc3339(*context.deadline_unix_seconds)
                : std::string())
        << "</text>\n";
    svg << "  </g>\n";
  }

  // Lines: one polyline per run of consecutive GPU counts that have a plan.
  auto write_lines = [&](const char* series, const char* color, auto value_y) {
    std::string coordinates;
    int count = 0;
    auto flush = [&] {
      if (count >= 2) {
        svg << "  <polyline class=\"line " << series << "\" fill=\"none\" stroke=\"" << color
            << "\" stroke-width=\"2\" points=\"" << coordinates << "\"/>\n";
      }
      coordinates.clear();
      count = 0;
    };
    for (const planner::SweepPoint& p : points) {
      if (!p.best) {
        flush();
        continue;
      }
      if (count > 0) coordinates += ' ';
      coordinates += Num(x_of(p.gpus)) + "," + Num(value_y(*p.best));
      ++count;
    }
    flush();
  };
  auto time_y = [&](const planner::Evaluation& e) {
    return time_axis.Y(e.total.total_seconds / time_unit_seconds);
  };
  auto right_y = [&](const planner::Evaluation& e) { return right_axis.Y(right_value(e)); };
  write_lines("time", kTimeColor, time_y);
  write_lines(right_series, kGpuHoursColor, right_y);

  // Markers, hollow when the plan misses the deadline; counts without a plan
  // get a grey cross on the x axis, with the reason as its tooltip.
  for (std::size_t i = 0; i < points.size(); ++i) {
    const planner::SweepPoint& p = points[i];
    const double x = x_of(p.gpus);
    if (!p.best) {
      svg << "  <text class=\"no-plan\" x=\"" << Num(x) << "\" y=\"" << Num(kBottom - 6)
          << "\" text-anchor=\"middle\" fill=\"#888\" font-size=\"14\">\u00d7<title>"
          << XmlEscape(std::to_string(p.gpus) + " GPUs: no plan: " + p.reason)
          << "</title></text>\n";
      continue;
    }
    const planner::Evaluation& e = *p.best;
    const std::string tooltip =
        XmlEscape(std::to_string(p.gpus) + " GPUs: " + e.layout.ToString() + "; total " +
                  planner::FormatDurationHuman(e.total.total_seconds) + ", " +
                  FormatGpuHours(e.gpu_hours) + " GPU-hours, cost " + FormatCost(e.cost) +
                  (p.meets_deadline ? "" : "; misses the deadline"));
    const double ty = time_y(e);
    const double hy = right_y(e);
    svg << "  <circle class=\"marker time\" cx=\"" << Num(x) << "\" cy=\"" << Num(ty)
        << "\" r=\"4.5\" stroke=\"" << kTimeColor << "\" stroke-width=\"2\" fill=\""
        << (p.meets_deadline ? kTimeColor : "white") << "\"><title>" << tooltip
        << "</title></circle>\n";
    svg << "  <rect class=\"marker " << right_series << "\" x=\"" << Num(x - 4) << "\" y=\""
        << Num(hy - 4) << "\" width=\"8\" height=\"8\" stroke=\"" << kGpuHoursColor
        << "\" stroke-width=\"2\" fill=\"" << (p.meets_deadline ? kGpuHoursColor : "white")
        << "\"><title>" << tooltip << "</title></rect>\n";
    if (static_cast<int>(i) == chosen) {
      svg << "  <g class=\"chosen\">\n";
      svg << "    <circle cx=\"" << Num(x) << "\" cy=\"" << Num(ty)
          << "\" r=\"10\" fill=\"none\" stroke=\"#2ca02c\" stroke-width=\"2.5\"/>\n";
      svg << "    <text x=\"" << Num(x) << "\" y=\"" << Num(ty - 15)
          << "\" text-anchor=\"middle\" fill=\"#2ca02c\" stroke=\"white\" stroke-width=\"4\""
          << " paint-order=\"stroke\">chosen: " << p.gpus << " GPUs</text>\n";
      svg << "  </g>\n";
    }
  }
  if (std::none_of(points.begin(), points.end(),
                   [](const planner::SweepPoint& p) { return p.best.has_value(); })) {
    svg << "  <text x=\"" << Num((kLeft + kRight) / 2) << "\" y=\"" << Num((kTop + kBottom) / 2)
        << "\" text-anchor=\"middle\">no layout fits at any of these GPU counts</text>\n";
  }

  // Legend: one row between the title and the plot, where it can never hide
  // a curve or the deadline.
  const double ly = 52;
  double lx = kLeft;
  svg << "  <g class=\"legend\">\n";
  svg << "    <line x1=\"" << Num(lx) << "\" y1=\"" << Num(ly) << "\" x2=\"" << Num(lx + 24)
      << "\" y2=\"" << Num(ly) << "\" stroke=\"" << kTimeColor << "\" stroke-width=\"2\"/>\n";
  svg << "    <circle cx=\"" << Num(lx + 12) << "\" cy=\"" << Num(ly) << "\" r=\"4.5\" fill=\""
      << kTimeColor << "\"/>\n";
  svg << "    <text x=\"" << Num(lx + 30) << "\" y=\"" << Num(ly + 4)
      << "\">predicted total time (left)</text>\n";
  lx += 215;
  svg << "    <line x1=\"" << Num(lx) << "\" y1=\"" << Num(ly) << "\" x2=\"" << Num(lx + 24)
      << "\" y2=\"" << Num(ly) << "\" stroke=\"" << kGpuHoursColor << "\" stroke-width=\"2\"/>\n";
  svg << "    <rect x=\"" << Num(lx + 8) << "\" y=\"" << Num(ly - 4)
      << "\" width=\"8\" height=\"8\" fill=\"" << kGpuHoursColor << "\"/>\n";
  svg << "    <text x=\"" << Num(lx + 30) << "\" y=\"" << Num(ly + 4) << "\">" << right_title
      << " (right)</text>\n";
  lx += 160;
  if (deadline_seconds) {
    svg << "    <line x1=\"" << Num(lx) << "\" y1=\"" << Num(ly) << "\" x2=\"" << Num(lx + 24)
        << "\" y2=\"" << Num(ly) << "\" stroke=\"" << kDeadlineColor
        << "\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n";
    svg << "    <text x=\"" << Num(lx + 30) << "\" y=\"" << Num(ly + 4) << "\">deadline</text>\n";
    lx += 105;
  }
  svg << "    <circle cx=\"" << Num(lx + 12) << "\" cy=\"" << Num(ly)
      << "\" r=\"4.5\" fill=\"white\""
      << " stroke=\"#666\" stroke-width=\"2\"/>\n";
  svg << "    <text x=\"" << Num(lx + 24) << "\" y=\"" << Num(ly + 4)
      << "\" fill=\"#666\">hollow: misses the deadline</text>\n";
  if (std::any_of(points.begin(), points.end(),
                  [](const planner::SweepPoint& p) { return !p.best.has_value(); })) {
    svg << "    <text x=\"" << Num(kRight) << "\" y=\"" << Num(ly + 18)
        << "\" text-anchor=\"end\" fill=\"#888\">\u00d7 on the axis: no plan at that "
           "count</text>\n";
  }
  svg << "  </g>\n";
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace pacer::cli
