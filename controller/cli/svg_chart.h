// The chart of `pacer sweep --svg FILE`: a self-contained SVG (no scripts,
// fonts or external references) with GPUs on a log2 x axis, the predicted
// total time on the left y axis (minutes, hours or days, whichever reads
// best; a log scale when the times span more than 20x), GPU-hours on the
// right y axis (the cost when every plan has a price), point markers on both
// series (hollow where a plan misses the deadline), the plan `pacer plan`
// would choose ringed, a dashed horizontal deadline line labelled with its
// date, axis ticks, the GPU types on the x axis, a legend and a title naming
// the job. GPU counts without a plan get a grey cross on the x axis (the
// reason as its tooltip) and break the lines. Each marker carries a <title>
// tooltip with the plan's numbers.
// Thread-safety: pure functions.
#ifndef PACER_CLI_SVG_CHART_H_
#define PACER_CLI_SVG_CHART_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pacer/planner/job_spec.h"
#include "pacer/planner/search.h"

namespace pacer::cli {

// `text` with &, <, >, " and ' replaced by XML entities.
std::string XmlEscape(std::string_view text);

// The SVG document (starting with "<svg"). `points` ascending by GPUs;
// `deadline_seconds` is the time from now to the deadline, when there is one.
struct SweepChartContext {
  std::optional<int64_t> deadline_unix_seconds;              // for the deadline's label
  planner::Objective objective = planner::Objective::kCost;  // which plan is "chosen"
};
std::string SweepChartSvg(std::string_view job_name, const std::vector<planner::SweepPoint>& points,
                          std::optional<double> deadline_seconds,
                          const SweepChartContext& context = {});

}  // namespace pacer::cli

#endif  // PACER_CLI_SVG_CHART_H_
