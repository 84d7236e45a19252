// Human output of `pacer plan` (the default `-o table`): the chosen plan in
// plain words, how it stands against the deadline, the alternatives as a
// table, warnings, and for an infeasible job an INFEASIBLE block with what
// would make it feasible. Durations use FormatDurationHuman, memory GiB
// (2^30 bytes), instants RFC 3339 UTC.
// Thread-safety: pure functions of their arguments (they write to `out`).
#ifndef PACER_CLI_PLAN_REPORT_H_
#define PACER_CLI_PLAN_REPORT_H_

#include <ostream>

#include "pacer/planner/job_spec.h"
#include "pacer/planner/search.h"

namespace pacer::cli {

// The chosen plan: layout, step and total time, completion vs deadline with
// slack, memory, GPU-hours and cost. Used by plan and explain.
void WritePlanSummary(const planner::JobSpec& job, const planner::PlanResult& result,
                      std::ostream& out);

// "INFEASIBLE: finishes 5h12m after the deadline" and the advice; nothing
// when the result is feasible. Advice beyond the job's own limits (more GPUs
// than spec.resources.maxGPUs) says which limit to raise.
void WriteInfeasibleBlock(const planner::JobSpec& job, const planner::PlanResult& result,
                          std::ostream& out);

// Without --cluster the planner uses a built-in example inventory (one pool
// per common GPU type, all free, no prices): say so, and how to use yours.
void WriteBuiltInInventoryNote(std::ostream& out);

// The whole `pacer plan` table output.
void WritePlanReport(const planner::JobSpec& job, const planner::PlanResult& result,
                     std::ostream& out);

}  // namespace pacer::cli

#endif  // PACER_CLI_PLAN_REPORT_H_
