// Machine-readable output of the planning commands: planner results as JSON
// trees. YAML output is rendered from the same trees (yaml_output.h), so the
// two formats always carry the same fields and values.
//
// The plan object's field names (gpuType, nodes, ..., predictedMemoryGiB, ...)
// are a contract with the TrainJob's status.plan and must not change. Units:
// seconds for durations (`...Seconds`), GiB = 2^30 bytes (`...GiB`), RFC 3339
// UTC strings for instants (`...Time`, deadline, now), GPU-hours, and cost in
// the inventory's currency per GPU-hour times GPU-hours (null when unknown).
// Floating-point values are rounded to 6 significant digits so that output
// is readable and stable; counts are exact integers.
// Thread-safety: pure functions.
#ifndef PACER_CLI_PLAN_OUTPUT_H_
#define PACER_CLI_PLAN_OUTPUT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "pacer/planner/cost_model.h"
#include "pacer/planner/search.h"

namespace pacer::cli {

// Keys keep the order in which they are written: readable output.
using Json = nlohmann::ordered_json;

// 2^30 bytes.
inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// `x` rounded to `digits` significant decimal digits (0, inf and NaN as is).
double RoundSignificant(double x, int digits = 6);

// A layout's fields as status.plan and status.nextPlan spell them (gpuType
// .. activationCheckpointing), without predictions.
Json LayoutJson(const planner::Layout& layout);

// The plan object (the status.plan contract) for one evaluated layout:
// LayoutJson and the predictions.
Json PlanJson(const planner::Evaluation& evaluation, int64_t now_unix_seconds);

// {"memory": {...GiB}, "stepTime": {...Seconds}, "totalTime": {...}}.
Json BreakdownJson(const planner::Evaluation& evaluation);

// {"layoutsConsidered", "evaluated", "pruned"}.
Json SearchStatsJson(const planner::SearchStats& stats);

// {"lateSeconds", "earliestCompletionTime", "gpusNeeded", ...}.
Json AdviceJson(const planner::InfeasibleAdvice& advice);

// The whole `pacer plan -o json` document: plan, feasible, alternatives,
// breakdown, deadline, now, warnings, search, and advice when infeasible.
Json PlanResultJson(const planner::PlanResult& result);

// One entry per rejection reason: {"reason", "count", "detail", "best"}.
Json RejectionsJson(const std::vector<planner::RejectionSummary>& rejections,
                    int64_t now_unix_seconds);

}  // namespace pacer::cli

#endif  // PACER_CLI_PLAN_OUTPUT_H_
