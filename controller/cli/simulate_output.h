// What `pacer simulate` prints: a summary table with one row per policy, or
// the same as JSON (with each job's outcome when one policy ran).
// Thread-safety: pure functions.
#ifndef PACER_CLI_SIMULATE_OUTPUT_H_
#define PACER_CLI_SIMULATE_OUTPUT_H_

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "pacer/sched/simulator.h"

namespace pacer::cli {

struct SimulationRun {
  sched::Policy policy = sched::Policy::kPacer;
  sched::RestartModel restart;
  sched::SimResult result;
};

struct SimulationSetup {
  std::string trace;       // the trace's path, as given
  std::string throughput;  // the table's path, or "built-in"
  std::string gpu_type;
  int cluster_gpus = 0;
  int jobs = 0;
};

void WriteSimulationTable(const SimulationSetup& setup, const std::vector<SimulationRun>& runs,
                          std::ostream& out);

nlohmann::json SimulationJson(const SimulationSetup& setup, const std::vector<SimulationRun>& runs);

}  // namespace pacer::cli

#endif  // PACER_CLI_SIMULATE_OUTPUT_H_
