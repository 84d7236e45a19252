// Local mode's launcher: each node of the plan is one pacer-worker process on
// this machine (it forks one rank per GPU of the node, or per CPU "device"),
// started with the same environment contract the worker pods get
// (reconcile/worker_env.h), in a process group of its own so that the
// terminal's Ctrl-C reaches `pacer run` only, which then stops the workers
// gracefully (SIGTERM -> checkpoint -> exit code 6).
//
// Files: <work_dir>/checkpoints (PACER_CHECKPOINT_DIR, kept between runs so a
// second `pacer run` resumes) and <work_dir>/logs/attempt-<a>-node-<n>.log.
// Thread-safety: all methods are safe to call concurrently (one mutex).
#ifndef PACER_CONTROLLER_LOCAL_PROCESS_LAUNCHER_H_
#define PACER_CONTROLLER_LOCAL_PROCESS_LAUNCHER_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "reconcile/interfaces.h"

namespace pacer::controller {

// Whether `path` can be started as the worker: a file that exists, is not a
// directory, and this user may execute. Checked before anything is planned:
// a wrong --worker-binary surfaced only at the first launch, as six retried
// "cannot start" warnings and exit 1. InvalidArgument says which of these
// `path` is not (the message starts with the path).
Status CheckWorkerBinary(const std::string& path);

struct ProcessLauncherOptions {
  std::string worker_binary;  // path to pacer-worker
  std::string work_dir;       // checkpoints and logs
  std::string backend;        // "", "cpu" or "gpu" (PACER_BACKEND)
  double scale = 1.0;         // PACER_SCALE (< 1 shrinks the model)
  // After a SIGTERM, how long Remove waits before SIGKILL.
  std::chrono::milliseconds kill_grace{20000};
  // Descriptors every worker inherits: `pacer run` passes its work-directory
  // lock (WorkDirLock::fd), so that workers outliving a killed `pacer run`
  // hold the directory until they have saved their checkpoint and exited.
  std::vector<int> inherited_fds;
};

class ProcessLauncher final : public Launcher {
 public:
  explicit ProcessLauncher(ProcessLauncherOptions options);
  ~ProcessLauncher() override;  // kills and reaps any worker still running

  ProcessLauncher(const ProcessLauncher&) = delete;
  ProcessLauncher& operator=(const ProcessLauncher&) = delete;

  Status Launch(const LaunchSpec& spec) override;
  StatusOr<std::optional<WorkerGroup>> Observe(const JobRef& job) override;
  Status Stop(const JobRef& job, StopMode mode) override;

  // The /metrics ports of every rank of the job's live workers.
  std::vector<int> MetricsPorts(const JobRef& job);
  // The log file of node `node_rank` of the job's current attempt ("" if none).
  std::string LogPath(const JobRef& job, int node_rank) const;

 private:
  // A worker is its process group (the spawn makes it one): a wrapper
  // script given as --worker-binary that runs pacer-worker without exec ends
  // at the first SIGTERM and leaves the worker behind, still checkpointing.
  struct Process {
    pid_t pid = -1;  // the group's leader, and the group's id
    int node_rank = 0;
    bool leader_reaped = false;
    std::chrono::steady_clock::time_point leader_reaped_at;
    std::chrono::steady_clock::time_point term_sent_at;
    // Seen empty, or given up on after a stop's grace: never signalled
    // again (its id may name another group by then).
    bool group_gone = false;
    // The leader is reaped and, once a stop was sent, the group is gone.
    bool exited = false;
    bool term_sent = false;  // to the group, by a stop (at term_sent_at)
    int exit_code = 0;       // 128 + the signal when one ended it
    int term_signal = 0;     // the signal that ended the leader; 0 when it exited
    std::string log_path;
    std::vector<int> metrics_ports;
  };
  struct Group {
    int attempt = 0;
    bool stopping = false;
    planner::Layout layout;
    std::string spec_hash;  // what it was launched with (WorkerGroup)
    int64_t total_steps = 0;
    int64_t launch_unix_seconds = 0;
    std::vector<Process> processes;
  };

  void ReapLocked(Group& group);
  void ReapLocked(Process& p);
  void KillLocked(Group& group);

  ProcessLauncherOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Group> groups_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_LOCAL_PROCESS_LAUNCHER_H_
