// `pacer simulate TRACE.csv --gpus N`: replays a job trace through the
// multi-job scheduling policy (pacer/sched/scheduler.h) on a simulated clock
// and reports deadlines met, admissions, resizes and GPU utilisation
// (docs/cli.md, docs/scheduling.md). Built into RunCli.
// Thread-safety: one instance per command line.
#ifndef PACER_CLI_SIMULATE_COMMAND_H_
#define PACER_CLI_SIMULATE_COMMAND_H_

#include <string>

#include "cli/commands.h"

namespace pacer::cli {

class SimulateCommand final : public CommandExtension {
 public:
  const char* name() const override { return "simulate"; }
  const char* description() const override;
  void AddOptions(CLI::App* command) override;
  int Run(std::ostream& out, std::ostream& err) override;

 private:
  std::string trace_path_;
  int gpus_ = 0;
  std::string gpu_type_;
  std::string policy_ = "pacer";
  std::string throughput_path_;
  std::string max_gpus_path_;
  std::string output_ = "table";
  std::string svg_path_;
  double hysteresis_ = 2.0;
  double headroom_ = 0.5;
};

}  // namespace pacer::cli

#endif  // PACER_CLI_SIMULATE_COMMAND_H_
