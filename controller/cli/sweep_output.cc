#include "cli/sweep_output.h"

#include <string>

#include "cli/format.h"
#include "cli/table.h"
#include "pacer/planner/units.h"

namespace pacer::cli {

void WriteSweepTable(const planner::JobSpec& job, const std::vector<planner::SweepPoint>& points,
                     int64_t now_unix_seconds, std::optional<int64_t> deadline_unix_seconds,
                     std::ostream& out) {
  out << "Sweep for " << job.namespace_name << "/" << job.name
      << " (objective: " << planner::ObjectiveName(job.objective)
      << ", free-GPU limits ignored), now " << planner::FormatRfc3339(now_unix_seconds)
      << ", deadline "
      << (deadline_unix_seconds ? planner::FormatRfc3339(*deadline_unix_seconds) : "none") << "\n";
  Table table(
      {"GPUS", "LAYOUT", "STEP", "TOTAL", "GPU-HOURS", "COST", "MEETS DEADLINE"},
      {Table::Align::kRight, Table::Align::kLeft, Table::Align::kRight, Table::Align::kRight,
       Table::Align::kRight, Table::Align::kRight, Table::Align::kLeft});
  for (const planner::SweepPoint& p : points) {
    if (!p.best) {
      table.AddRow({std::to_string(p.gpus), "no plan: " + p.reason, "-", "-", "-", "-", "no"});
      continue;
    }
    const planner::Evaluation& e = *p.best;
    table.AddRow({std::to_string(p.gpus), e.layout.ToString(), FormatSeconds(e.step.step_seconds),
                  planner::FormatDurationHuman(e.total.total_seconds), FormatGpuHours(e.gpu_hours),
                  FormatCost(e.cost), p.meets_deadline ? "yes" : "no"});
  }
  table.Write(out);
}

Json SweepJson(const planner::JobSpec& job, const std::vector<planner::SweepPoint>& points,
               int64_t now_unix_seconds, std::optional<int64_t> deadline_unix_seconds) {
  Json json;
  json["job"] = job.name;
  json["now"] = planner::FormatRfc3339(now_unix_seconds);
  json["deadline"] =
      deadline_unix_seconds ? Json(planner::FormatRfc3339(*deadline_unix_seconds)) : Json(nullptr);
  json["points"] = Json::array();
  for (const planner::SweepPoint& p : points) {
    Json point;
    point["gpus"] = p.gpus;
    point["meetsDeadline"] = p.meets_deadline;
    point["plan"] = p.best ? PlanJson(*p.best, now_unix_seconds) : Json(nullptr);
    point["reason"] = p.best ? Json(nullptr) : Json(p.reason);
    json["points"].push_back(std::move(point));
  }
  return json;
}

}  // namespace pacer::cli
