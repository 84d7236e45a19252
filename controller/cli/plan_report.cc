#include "cli/plan_report.h"

#include <string>
#include <vector>

#include "cli/format.h"
#include "cli/plan_output.h"
#include "cli/table.h"
#include "pacer/planner/units.h"

namespace pacer::cli {
namespace {

void Line(std::ostream& out, std::string_view label, const std::string& value) {
  std::string padded(label);
  padded.resize(13, ' ');
  out << "  " << padded << value << '\n';
}

std::string JoinInts(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) {
    if (!text.empty()) text += ", ";
    text += std::to_string(v);
  }
  return text;
}

void WriteAlternatives(const planner::PlanResult& result, std::ostream& out) {
  if (result.alternatives.empty()) return;
  Table table({"#", "LAYOUT", "GPUS", "STEP", "TOTAL", "COMPLETION", "MEMORY", "GPU-HOURS", "COST"},
              {Table::Align::kRight, Table::Align::kLeft, Table::Align::kRight,
               Table::Align::kRight, Table::Align::kRight, Table::Align::kLeft,
               Table::Align::kRight, Table::Align::kRight, Table::Align::kRight});
  int rank = 1;
  for (const planner::Evaluation& e : result.alternatives) {
    table.AddRow(
        {std::to_string(rank++), e.layout.ToString(), std::to_string(e.layout.gpus()),
         FormatSeconds(e.step.step_seconds), planner::FormatDurationHuman(e.total.total_seconds),
         planner::FormatRfc3339(
             planner::CompletionUnixSeconds(result.now_unix_seconds, e.total.total_seconds)),
         FormatGiB(e.memory.total_bytes()), FormatGpuHours(e.gpu_hours), FormatCost(e.cost)});
  }
  out << "\nAlternatives (" << result.alternatives.size() << "):\n";
  table.Write(out, "  ");
}

}  // namespace

void WritePlanSummary(const planner::JobSpec& job, const planner::PlanResult& result,
                      std::ostream& out) {
  if (!result.plan) return;
  const planner::Evaluation& e = *result.plan;
  const planner::Layout& l = e.layout;
  out << (result.feasible ? "Plan" : "Fastest plan") << " for " << job.namespace_name << "/"
      << job.name << " (objective: " << planner::ObjectiveName(job.objective) << ")\n";
  Line(out, "Layout", l.ToString());
  Line(out, "GPUs",
       std::to_string(l.gpus()) + " x " + l.gpu_type + " in pool " + l.pool + " (" +
           std::to_string(l.nodes) + (l.nodes == 1 ? " node" : " nodes") + " x " +
           std::to_string(l.gpus_per_node) + ")");
  std::string parallelism = "tensor " + std::to_string(l.tensor_parallel) + " x pipeline " +
                            std::to_string(l.pipeline_parallel);
  if (l.virtual_stages > 1) {
    parallelism += " (" + std::to_string(l.virtual_stages) + " virtual stages)";
  }
  parallelism +=
      " x data " + std::to_string(l.data_parallel) + ", ZeRO-" + std::to_string(l.zero_stage);
  if (l.sequence_parallel) parallelism += ", sequence parallel";
  Line(out, "Parallelism", parallelism);
  Line(out, "Batch",
       "micro-batch " + std::to_string(l.micro_batch_size) + " x " +
           std::to_string(l.gradient_accumulation_steps) + " accumulation steps x " +
           std::to_string(l.data_parallel) + " replicas = " + std::to_string(l.global_batch()) +
           " sequences");
  Line(out, "Recompute",
       std::string("activation checkpointing ") + planner::RecomputeName(l.recompute));
  Line(out, "Step time",
       FormatSeconds(e.step.step_seconds) + "  (MFU " + FormatPercent(e.mfu) + ")");
  Line(out, "Total time",
       planner::FormatDurationHuman(e.total.total_seconds) + "  (" +
           FormatGrouped(static_cast<double>(e.total.optimizer_steps)) + " optimizer steps)");
  const int64_t completion =
      planner::CompletionUnixSeconds(result.now_unix_seconds, e.total.total_seconds);
  Line(out, "Completion", planner::FormatRfc3339(completion));
  if (result.deadline_unix_seconds) {
    const double slack = static_cast<double>(*result.deadline_unix_seconds - completion);
    Line(out, "Deadline",
         planner::FormatRfc3339(*result.deadline_unix_seconds) + "  (slack " +
             FormatSignedDuration(slack) + ")");
  } else {
    Line(out, "Deadline", "none");
  }
  Line(
      out, "Memory",
      FormatGiB(e.memory.total_bytes()) + " of " + FormatGiB(e.memory.capacity_bytes) + " per GPU");
  Line(out, "GPU-hours", FormatGpuHours(e.gpu_hours));
  Line(out, "Cost", e.cost > 0 ? FormatCost(e.cost) : "unknown (the inventory has no price)");
}

void WriteBuiltInInventoryNote(std::ostream& out) {
  out << "\nInventory: the built-in example (one pool per common GPU type, all free, no "
         "prices);\n  --cluster FILE plans for yours (`pacer inventory` writes one from a "
         "cluster)\n";
}

void WriteInfeasibleBlock(const planner::JobSpec& job, const planner::PlanResult& result,
                          std::ostream& out) {
  if (result.feasible) return;
  if (!result.advice) {
    out << "INFEASIBLE: no plan meets the deadline\n";
    return;
  }
  const planner::InfeasibleAdvice& advice = *result.advice;
  out << "INFEASIBLE: finishes " << planner::FormatDurationHuman(advice.late_seconds)
      << " after the deadline";
  if (result.deadline_unix_seconds) {
    out << " (" << planner::FormatRfc3339(*result.deadline_unix_seconds) << ")";
  }
  out << '\n';
  out << "  Earliest completion with the GPUs available: "
      << planner::FormatRfc3339(advice.earliest_completion_unix_seconds) << '\n';
  if (advice.gpus_needed) {
    out << "  GPUs that would meet the deadline: " << *advice.gpus_needed;
    if (advice.gpus_needed_type) out << " x " << *advice.gpus_needed_type;
    // The planner sizes this without maxGPUs: never advise past the job's
    // own limit without naming it.
    if (job.resources.max_gpus && *advice.gpus_needed > *job.resources.max_gpus) {
      out << ", more than spec.resources.maxGPUs (" << *job.resources.max_gpus
          << "): raise maxGPUs to " << *advice.gpus_needed << " or move the deadline";
    }
    out << '\n';
  }
  if (!advice.nearby_global_batch_sizes.empty()) {
    out << "  Global batch sizes that divide better: " << JoinInts(advice.nearby_global_batch_sizes)
        << '\n';
  }
  if (!advice.summary.empty()) out << "  " << advice.summary << '\n';
  out << '\n';
}

void WritePlanReport(const planner::JobSpec& job, const planner::PlanResult& result,
                     std::ostream& out) {
  WriteInfeasibleBlock(job, result, out);
  WritePlanSummary(job, result, out);
  WriteAlternatives(result, out);
  // A layout is evaluated once per micro-batch and recompute choice that
  // its bound did not rule out: evaluations can outnumber layouts.
  out << "\nSearched " << FormatGrouped(static_cast<double>(result.stats.layouts_considered))
      << " layouts: " << FormatGrouped(static_cast<double>(result.stats.evaluated))
      << " cost-model evaluations (micro-batch and recompute variants), "
      << FormatGrouped(static_cast<double>(result.stats.pruned))
      << " skipped by a bound; `pacer explain` says why the others lost.\n";
  if (!result.warnings.empty()) {
    out << '\n';
    for (const std::string& warning : result.warnings) out << "warning: " << warning << '\n';
  }
}

}  // namespace pacer::cli
