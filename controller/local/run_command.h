// `pacer run JOB.yaml`: local mode. The controller's reconciler
// (reconcile/reconciler.h) drives pacer-worker processes on this machine
// (ProcessLauncher), reads their /metrics directly (ScrapedMetricsSource) and
// plans against this machine (LocalInventory): the same plan -> launch ->
// measure -> re-plan loop as in a cluster, without one. The terminal shows a
// live progress line (step, measured vs predicted step time, ETA against the
// deadline, re-plans) and a summary with the first ETA against the actual
// finish. Ctrl-C stops the workers at a checkpoint; running again resumes.
//
// Exit codes: 0 Succeeded; 1 Failed (or internal error); 2 invalid input;
// 3 Infeasible (the deadline cannot be met here); 4 this machine cannot run
// the job at all (GPUs it does not have: a cluster would wait, this machine
// never gets them); 130 interrupted by Ctrl-C
// after a clean stop.
// Thread-safety: one run per process (it installs a SIGINT handler).
#ifndef PACER_CONTROLLER_LOCAL_RUN_COMMAND_H_
#define PACER_CONTROLLER_LOCAL_RUN_COMMAND_H_

#include <ostream>
#include <string>

#include "cli/commands.h"
#include "pacer/status.h"
#include "reconcile/reconciler.h"

namespace pacer::controller {

struct RunOptions {
  std::string job_path;
  std::string worker_binary;      // "" = $PACER_WORKER_BINARY, next to `pacer`, on PATH
  std::string work_dir;           // "" = DefaultWorkDir(namespace, name)
  std::string backend = "auto";   // auto, cpu or gpu
  int cpu_devices = 0;            // 0 = min(cores, 4)
  double cpu_tflops = 0.02;       // per CPU device, for the planner
  std::string progress = "auto";  // auto (a live line on a terminal), plain, none
  int max_restarts = 3;
};

int RunLocal(const RunOptions& options, std::ostream& out, std::ostream& err);

// The backend `pacer run` trains with, "gpu" or "cpu", from --backend
// (`requested`: auto, cpu or gpu), whether this machine shows NVIDIA GPUs the
// catalog knows (`gpus_found`), the visible ones it does not
// (`uncataloged_gpus`, LocalInventory::uncataloged_gpus()) and whether
// pacer-worker's GPU backend (`plugin_path`) is installed. A machine with a
// driver but a build without nvcc has GPUs and no GPU backend; one with an L4
// has a GPU no plan can be made for: auto trains on the CPU and says why in
// `*note`; gpu is InvalidArgument saying what is missing (the worker refused
// it with exit 2 and the job ended Failed; an L4 was "no NVIDIA GPU found").
StatusOr<std::string> ChooseLocalBackend(const std::string& requested, bool gpus_found,
                                         const std::string& uncataloged_gpus,
                                         bool gpu_backend_installed, const std::string& plugin_path,
                                         std::string* note);

// A job's work directory when --work-dir is not given:
// .pacer/<namespace>/<name>. One directory per job: a namespace is a DNS
// label and holds no '/', so no two jobs share one (".pacer/<ns>-<name>"
// gave team-a/llama and team/a-llama the same checkpoints).
// What a local attempt takes from launch to its first step, planned with
// (cost_model.h's startup_seconds; a cluster's default is 300 s).
inline constexpr double kLocalStartupSeconds = 15;

// The reconciler's options for `pacer run`: a local start-up, and re-plan
// margins and intervals scaled to it (a cluster's 600 s are twice a pod's
// start-up).
ReconcilerOptions LocalReconcilerOptions(int max_restarts);

std::string DefaultWorkDir(const std::string& namespace_name, const std::string& name);

// `pacer run` for the CLI (cli::RunCli's extension point).
class RunCommand final : public cli::CommandExtension {
 public:
  const char* name() const override { return "run"; }
  const char* description() const override;
  void AddOptions(CLI::App* command) override;
  int Run(std::ostream& out, std::ostream& err) override { return RunLocal(options_, out, err); }

 private:
  RunOptions options_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_LOCAL_RUN_COMMAND_H_
