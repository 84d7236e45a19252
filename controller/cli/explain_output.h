// Output of `pacer explain`: the chosen plan, its memory and step-time
// breakdowns as horizontal bars (Unicode block characters, 1/8-cell
// resolution), and "why other layouts lost": per rejection reason the
// number of candidates, the best of them and the number it lost on. The
// JSON form carries the same data (the plan document plus a "reasons"
// array). Memory in GiB (2^30 bytes), times in seconds.
// Thread-safety: pure functions of their arguments (they write to `out`).
#ifndef PACER_CLI_EXPLAIN_OUTPUT_H_
#define PACER_CLI_EXPLAIN_OUTPUT_H_

#include <ostream>
#include <string>

#include "cli/plan_output.h"
#include "pacer/planner/job_spec.h"
#include "pacer/planner/search.h"

namespace pacer::cli {

// A bar of `width` cells filled to `fraction` (clamped to [0, 1]), padded
// with spaces to exactly `width` cells.
std::string HorizontalBar(double fraction, int width);

// The human explanation.
void WriteExplainReport(const planner::JobSpec& job, const planner::PlanResult& result,
                        std::ostream& out);

// PlanResultJson(result) plus "reasons": RejectionsJson(...).
Json ExplainJson(const planner::PlanResult& result);

}  // namespace pacer::cli

#endif  // PACER_CLI_EXPLAIN_OUTPUT_H_
