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

}  // namespace

void WriteSweepTable(const planner::JobSpec& job, const std::vector<planner::SweepPoint>& points,
                     int64_t now_unix_seconds, std::optional<int64_t> deadline_unix_seconds,
                     std::ostream& out) {
  out << "Sweep for " << job.namespace_name << "/" << job.name
      << " (objective: " << planner::ObjectiveName(job.objective)
      << ", free-GPU limits ignored), now " << planner::FormatRfc3339(now_unix_seconds)
      << ", deadline "
      << (deadline_unix_seconds ? planner::FormatRfc3339(*deadline_unix_seconds) : "none") << "\n";
  // The sweep plans every count asked for, also outside the job's own GPU
  // limits (what-if): such rows are marked, not silently mixed in.
  const int min_gpus = job.resources.min_gpus;
  const std::optional<int> max_gpus = job.resources.max_gpus;
  auto outside_limits = [&](int gpus) { return gpus < min_gpus || (max_gpus && gpus > *max_gpus); };
  Table table(
      {"GPUS", "LAYOUT", "STEP", "TOTAL", "GPU-HOURS", "COST", "MEETS DEADLINE"},
      {Table::Align::kRight, Table::Align::kLeft, Table::Align::kRight, Table::Align::kRight,
       Table::Align::kRight, Table::Align::kRight, Table::Align::kLeft});
  // A reason is a sentence or two: as a footnote it widens no row.
  std::vector<std::string> reasons;
  bool any_outside = false;
  for (const planner::SweepPoint& p : points) {
    std::string gpus = std::to_string(p.gpus);
    if (outside_limits(p.gpus)) {
      gpus += "*";
      any_outside = true;
    }
    if (!p.best) {
      auto known = std::find(reasons.begin(), reasons.end(), p.reason);
      if (known == reasons.end()) known = reasons.insert(reasons.end(), p.reason);
      const std::string note = "[" + std::to_string(known - reasons.begin() + 1) + "]";
      table.AddRow({gpus, "no plan " + note, "-", "-", "-", "-", "no"});
      continue;
    }
    const planner::Evaluation& e = *p.best;
    table.AddRow({gpus, e.layout.ToString(), FormatSeconds(e.step.step_seconds),
                  planner::FormatDurationHuman(e.total.total_seconds), FormatGpuHours(e.gpu_hours),
                  FormatCost(e.cost), p.meets_deadline ? "yes" : "no"});
  }
  table.Write(out);
  if (any_outside) {
    out << "* outside the job's spec.resources (minGPUs " << min_gpus;
    if (max_gpus) out << ", maxGPUs " << *max_gpus;
    out << "): planned as if the limits allowed it\n";
  }
  for (std::size_t i = 0; i < reasons.size(); ++i) {
    const std::string note = "[" + std::to_string(i + 1) + "] ";
    out << note << Wrapped(reasons[i], 96, std::string(note.size(), ' ')) << '\n';
  }
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
