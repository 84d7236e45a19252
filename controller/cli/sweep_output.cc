#include "cli/sweep_output.h"

#include <algorithm>
#include <string>

#include "cli/format.h"
#include "cli/table.h"
#include "pacer/planner/units.h"

namespace pacer::cli {

namespace {

// Breaks `text` into lines of at most `width` characters at spaces, each
// after the first indented by `indent`.
std::string Wrapped(const std::string& text, std::size_t width, const std::string& indent) {
  std::string out, line;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n" + indent;
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return out + line;
}

// The short code a table row shows for a point without a plan.
std::string ReasonCode(const planner::SweepPoint& p) {
  return p.rejected_by ? planner::RejectReasonName(*p.rejected_by) : "no-plan";
}

// One line per code under the table: what the code means for this job. The
// sentence for each count (which TP, PP and data-parallel sizes were tried)
// is in -o json/yaml, so no row widens.
std::string CodeLegend(const planner::JobSpec& job, const planner::SweepPoint& p) {
  if (!p.rejected_by) return p.reason;
  switch (*p.rejected_by) {
    case planner::RejectReason::kGpuCountLimits: {
      std::string limits = "minGPUs " + std::to_string(job.resources.min_gpus);
      if (job.resources.max_gpus) limits += ", maxGPUs " + std::to_string(*job.resources.max_gpus);
      return "outside the job's GPU limits (" + limits + "): not planned";
    }
    case planner::RejectReason::kLayoutIndivisible:
      return "the layout (tensor x pipeline parallel, TP x PP) does not divide the GPU count";
    case planner::RejectReason::kBatchIndivisible:
      return "the global batch (" + std::to_string(job.training.global_batch_size) +
             ") is not divisible by data-parallel degree x micro-batch";
    case planner::RejectReason::kOutOfMemory:
      return "no layout of that many GPUs fits in GPU memory";
    default:
      return p.reason;
  }
}

}  // namespace

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
  // Codes in order of first use, each with its legend line.
  std::vector<std::pair<std::string, std::string>> legend;
  for (const planner::SweepPoint& p : points) {
    if (!p.best) {
      const std::string code = ReasonCode(p);
      if (std::find_if(legend.begin(), legend.end(),
                       [&code](const auto& entry) { return entry.first == code; }) ==
          legend.end()) {
        legend.emplace_back(code, CodeLegend(job, p));
      }
      table.AddRow({std::to_string(p.gpus), "no plan: " + code, "-", "-", "-", "-", "no"});
      continue;
    }
    const planner::Evaluation& e = *p.best;
    table.AddRow({std::to_string(p.gpus), e.layout.ToString(), FormatSeconds(e.step.step_seconds),
                  planner::FormatDurationHuman(e.total.total_seconds), FormatGpuHours(e.gpu_hours),
                  FormatCost(e.cost), p.meets_deadline ? "yes" : "no"});
  }
  table.Write(out);
  for (const auto& [code, text] : legend) {
    out << Wrapped(code + ": " + text, 100, std::string(4, ' ')) << '\n';
  }
  if (!legend.empty()) out << "(-o json gives each count's reason in full)\n";
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
    point["reasonCode"] = p.best ? Json(nullptr) : Json(ReasonCode(p));
    json["points"].push_back(std::move(point));
  }
  return json;
}

}  // namespace pacer::cli
