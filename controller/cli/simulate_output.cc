#include "cli/simulate_output.h"

#include "cli/format.h"
#include "cli/table.h"

namespace pacer::cli {
namespace {

std::string RestartText(const sched::RestartModel& restart) {
  if (restart.keep_seconds == 0 && restart.per_doubling_seconds == 0 &&
      restart.restart_round_seconds == 0) {
    return "none";
  }
  return FormatFixed(restart.keep_seconds, 0) + " s per decision, relaunch +" +
         FormatFixed(restart.per_doubling_seconds, 0) + "(log2 g + 1) s, +" +
         FormatFixed(restart.restart_round_seconds, 0) + " s every " +
         std::to_string(restart.restart_round_events) + " decisions";
}

}  // namespace

void WriteSimulationTable(const SimulationSetup& setup, const std::vector<SimulationRun>& runs,
                          std::ostream& out) {
  out << "Trace " << setup.trace << ": " << setup.jobs << " jobs on " << setup.cluster_gpus << ' '
      << setup.gpu_type << " GPUs (throughput: " << setup.throughput << ")\n\n";
  Table table({"policy", "deadlines met", "ratio", "admitted", "rejected", "late", "resizes",
               "GPU util", "decisions"},
              {Table::Align::kLeft, Table::Align::kRight, Table::Align::kRight,
               Table::Align::kRight, Table::Align::kRight, Table::Align::kRight,
               Table::Align::kRight, Table::Align::kRight, Table::Align::kRight});
  for (const SimulationRun& run : runs) {
    const sched::SimResult& r = run.result;
    table.AddRow({sched::PolicyName(run.policy),
                  std::to_string(r.met_deadline) + "/" + std::to_string(r.jobs_with_deadline),
                  FormatFixed(r.deadline_ratio(), 3), std::to_string(r.admitted),
                  std::to_string(r.rejected), std::to_string(r.admitted_missed),
                  std::to_string(r.resizes), FormatPercent(r.utilisation),
                  std::to_string(r.decisions)});
  }
  table.Write(out, "  ");
  out << "\n  ratio: deadlines met / jobs with a deadline (rejected jobs count as misses)\n"
         "  late: admitted jobs that finished after their deadline\n";
  for (const SimulationRun& run : runs) {
    out << "  restart overhead (" << sched::PolicyName(run.policy)
        << "): " << RestartText(run.restart) << '\n';
  }
}

nlohmann::json SimulationJson(const SimulationSetup& setup,
                              const std::vector<SimulationRun>& runs) {
  nlohmann::json doc;
  doc["trace"] = setup.trace;
  doc["throughput"] = setup.throughput;
  doc["gpuType"] = setup.gpu_type;
  doc["clusterGPUs"] = setup.cluster_gpus;
  doc["jobs"] = setup.jobs;
  nlohmann::json results = nlohmann::json::array();
  for (const SimulationRun& run : runs) {
    const sched::SimResult& r = run.result;
    nlohmann::json entry = {{"policy", sched::PolicyName(run.policy)},
                            {"jobsWithDeadline", r.jobs_with_deadline},
                            {"metDeadline", r.met_deadline},
                            {"deadlineRatio", r.deadline_ratio()},
                            {"admitted", r.admitted},
                            {"rejected", r.rejected},
                            {"admittedLate", r.admitted_missed},
                            {"resizes", r.resizes},
                            {"decisions", r.decisions},
                            {"gpuUtilisation", r.utilisation},
                            {"gpuSeconds", r.gpu_seconds_used},
                            {"startSeconds", r.start_seconds},
                            {"endSeconds", r.end_seconds},
                            {"restart",
                             {{"keepSeconds", run.restart.keep_seconds},
                              {"perDoublingSeconds", run.restart.per_doubling_seconds},
                              {"restartRoundSeconds", run.restart.restart_round_seconds},
                              {"restartRoundEvents", run.restart.restart_round_events}}}};
    if (runs.size() == 1) {
      nlohmann::json jobs = nlohmann::json::array();
      for (const sched::JobOutcome& o : r.outcomes) {
        nlohmann::json job = {{"id", o.id},
                              {"admitted", o.admitted},
                              {"finished", o.finished},
                              {"metDeadline", o.met_deadline},
                              {"resizes", o.resizes},
                              {"stalledSeconds", o.stalled_seconds}};
        if (o.finish_seconds) job["finishSeconds"] = *o.finish_seconds;
        if (!o.reject_reason.empty()) job["rejectReason"] = o.reject_reason;
        jobs.push_back(std::move(job));
      }
      entry["jobs"] = std::move(jobs);
    }
    results.push_back(std::move(entry));
  }
  doc["results"] = std::move(results);
  return doc;
}

}  // namespace pacer::cli
