// Output of `pacer sweep`: one row per GPU count with the best plan of that
// size (layout, step seconds, total time, GPU-hours, cost, whether it meets
// the deadline) or the reason there is none; as a terminal table or JSON.
// The SVG chart is svg_chart.h. Units as in plan_output.h.
// Thread-safety: pure functions of their arguments (they write to `out`).
#ifndef PACER_CLI_SWEEP_OUTPUT_H_
#define PACER_CLI_SWEEP_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <vector>

#include "cli/plan_output.h"
#include "pacer/planner/job_spec.h"
#include "pacer/planner/search.h"

namespace pacer::cli {

// The table: a header, a rule, exactly one row per point (a point without a
// plan shows a short reason code, e.g. "no plan: batch-indivisible"), then
// one legend line per code used.
void WriteSweepTable(const planner::JobSpec& job, const std::vector<planner::SweepPoint>& points,
                     int64_t now_unix_seconds, std::optional<int64_t> deadline_unix_seconds,
                     std::ostream& out);

// {"job", "now", "deadline", "points": [{"gpus", "meetsDeadline", "plan", "reason",
// "reasonCode"}]}; "plan" is the plan object of plan_output.h or null,
// "reason" (the full sentence) and "reasonCode" null when there is a plan.
Json SweepJson(const planner::JobSpec& job, const std::vector<planner::SweepPoint>& points,
               int64_t now_unix_seconds, std::optional<int64_t> deadline_unix_seconds);

}  // namespace pacer::cli

#endif  // PACER_CLI_SWEEP_OUTPUT_H_
