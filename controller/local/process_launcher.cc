#include "local/process_launcher.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "local/child_process.h"
#include "pacer/planner/units.h"
#include "reconcile/worker_env.h"

extern char** environ;

namespace pacer::controller {

Status CheckWorkerBinary(const std::string& path) {
  // As posix_spawn will take it: a name without a '/' is a path in the
  // working directory, not looked up on PATH.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return InvalidArgumentError(path + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return InvalidArgumentError(path + ": is a directory, not a program");
  if (::access(path.c_str(), X_OK) != 0) {
    return InvalidArgumentError(path + ": not executable by this user (" + std::strerror(errno) +
                                "; chmod +x it if it is the pacer-worker program)");
  }
  return Status::Ok();
}

ProcessLauncher::ProcessLauncher(ProcessLauncherOptions options) : options_(std::move(options)) {}

ProcessLauncher::~ProcessLauncher() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, group] : groups_) KillLocked(group);
}

Status ProcessLauncher::Launch(const LaunchSpec& spec) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(spec.job.key());
  if (it != groups_.end()) {
    if (it->second.attempt == spec.attempt) return Status::Ok();  // already launched
    // Transient: the reconciler retries with its backoff once the old
    // attempt's processes are gone (FailedPrecondition would be a refusal).
    return UnavailableError("attempt " + std::to_string(it->second.attempt) + " of " +
                            spec.job.key() + " is still running");
  }
  const planner::Layout& layout = spec.plan.layout;
  std::error_code ec;
  const std::filesystem::path logs = std::filesystem::path(options_.work_dir) / "logs";
  const std::filesystem::path checkpoints =
      std::filesystem::path(options_.work_dir) / "checkpoints";
  for (const std::filesystem::path& dir : {logs, checkpoints}) {
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return UnavailableError("cannot create " + dir.string() + ": " + ec.message() +
                              "; make it a writable directory, or run with another --work-dir");
    }
  }

  // The rendezvous port is bound only when the workers start: keep the
  // metrics ports clear of it.
  ASSIGN_OR_RETURN(int master_port, FindFreePortRun(1, {}));
  ASSIGN_OR_RETURN(int metrics_base, FindFreePortRun(layout.gpus(), {master_port}));

  Group group;
  group.attempt = spec.attempt;
  group.layout = layout;
  group.spec_hash = spec.spec_hash;
  group.total_steps = spec.total_steps;
  group.launch_unix_seconds = spec.plan_unix_seconds;
  for (int node = 0; node < layout.nodes; ++node) {
    WorkerEnvOptions env_options;
    env_options.master_addr = "127.0.0.1";
    env_options.master_port = master_port;
    env_options.checkpoint_dir = checkpoints.string();
    env_options.metrics_port = metrics_base + node * layout.gpus_per_node;
    env_options.backend = options_.backend;
    env_options.scale = options_.scale;
    std::map<std::string, std::string> env = WorkerEnvironment(spec, node, env_options);
    // Ours: the worker stops its ranks when this process is gone, however
    // it ended (SIGKILL, the OOM killer), instead of training on unseen.
    env["PACER_PARENT_PID"] = std::to_string(::getpid());
    // The TrainJob's spec.worker.env, as a cluster's pods get it: under the
    // contract, which wins, over this shell's environment.
    for (const planner::EnvVar& var : spec.spec.worker.env) env.emplace(var.name, var.value);

    // The parent's environment (PATH, LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES,
    // ...) under both.
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      const size_t eq = entry.find('=');
      if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
    }

    Process p;
    p.node_rank = node;
    p.log_path = (logs / ("attempt-" + std::to_string(spec.attempt) + "-node-" +
                          std::to_string(node) + ".log"))
                     .string();
    for (int r = 0; r < layout.gpus_per_node; ++r) {
      p.metrics_ports.push_back(env_options.metrics_port + r);
    }
    // Appended, not truncated: an interrupted run's log is kept when the
    // same attempt number starts again on resume, below a header.
    std::ofstream log(p.log_path, std::ios::app);
    log << "==== pacer run: attempt " << spec.attempt << ", node " << node << ", started "
        << planner::FormatRfc3339(static_cast<int64_t>(std::time(nullptr))) << " ====\n";
    log.close();
    if (!log) {
      // Said here: the worker's spawn would fail on it too, and its error
      // reads as a missing worker binary.
      KillLocked(group);
      return UnavailableError("cannot write the worker's log " + p.log_path + ": " +
                              std::strerror(errno) + "; make " + logs.string() +
                              " a writable directory, or run with another --work-dir");
    }
    StatusOr<pid_t> pid = SpawnProcess(options_.worker_binary, {"run"}, env, p.log_path,
                                       LogMode::kAppend, options_.inherited_fds);
    if (!pid.ok()) {
      KillLocked(group);
      return Status(pid.status().code(),
                    pid.status().message() + " (set --worker-binary to the pacer-worker program)");
    }
    p.pid = *pid;
    group.processes.push_back(std::move(p));
  }
  groups_[spec.job.key()] = std::move(group);
  return Status::Ok();
}

namespace {

// Whether any process of group `pgid` is left. The group's id stays reserved
// while it has members, so it names no other group until this says no.
bool GroupAlive(pid_t pgid) { return ::kill(-pgid, 0) == 0 || errno == EPERM; }

}  // namespace

void ProcessLauncher::ReapLocked(Process& p) {
  if (p.pid <= 0 || p.group_gone) return;
  int status = 0;
  if (!p.leader_reaped) {
    const pid_t r = ::waitpid(p.pid, &status, WNOHANG);
    if (r == p.pid) {
      p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      p.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    } else if (r < 0 && errno == ECHILD) {
      p.exit_code = 1;  // reaped elsewhere; nothing more to learn
    } else {
      return;
    }
    p.leader_reaped = true;
    p.leader_reaped_at = std::chrono::steady_clock::now();
  }
  // Members left behind by the leader are re-parented to this process when
  // it is PID 1 (a container's) or a subreaper: they are ours to reap, or
  // their zombies would keep the group alive.
  while (::waitpid(-p.pid, &status, WNOHANG) > 0) {
  }
  if (!GroupAlive(p.pid)) {
    p.group_gone = true;
  } else if (p.term_sent &&
             std::chrono::steady_clock::now() - std::max(p.leader_reaped_at, p.term_sent_at) >=
                 options_.kill_grace) {
    // A member that ignores the stop, or one that cannot go (a zombie of a
    // parent that does not reap, another user's process): killed and
    // given up on after the grace, so a stop cannot wait forever.
    ::kill(-p.pid, SIGKILL);
    p.group_gone = true;
  }
  // Without a stop the leader's exit is the worker's (a background helper
  // the wrapper left must not hold the job); after one, the worker may
  // still be writing its checkpoint behind a wrapper that died of the
  // SIGTERM, and a next attempt must not start beside it.
  p.exited = p.group_gone || !p.term_sent;
}

void ProcessLauncher::ReapLocked(Group& group) {
  for (Process& p : group.processes) ReapLocked(p);
}

void ProcessLauncher::KillLocked(Group& group) {
  ReapLocked(group);
  for (Process& p : group.processes) {
    // A leader that exited may have left the worker (a wrapper's crash).
    if (p.pid <= 0 || p.group_gone) continue;
    if (p.term_sent) {
      // It is stopping already and a second SIGTERM would be the same stop
      // to it (docs/worker.md): a removal (a second Ctrl-C) kills its
      // process group, the worker and its ranks, now.
      ::kill(-p.pid, SIGKILL);
    } else {
      ::kill(-p.pid, SIGTERM);
      p.term_sent = true;
      p.term_sent_at = std::chrono::steady_clock::now();
      p.exited = false;  // until the group is gone
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.kill_grace;
  for (Process& p : group.processes) {
    while (true) {
      ReapLocked(p);
      if (p.exited || p.pid <= 0) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(-p.pid, SIGKILL);
        if (!p.leader_reaped) {
          int status = 0;
          ::waitpid(p.pid, &status, 0);
          p.exit_code = 137;
          p.leader_reaped = true;
        }
        p.group_gone = true;
        p.exited = true;
        break;
      }
      // Polling a child's exit: waitpid with a timeout does not exist.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

StatusOr<std::optional<WorkerGroup>> ProcessLauncher::Observe(const JobRef& job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(job.key());
  if (it == groups_.end()) return std::optional<WorkerGroup>();
  Group& g = it->second;
  ReapLocked(g);
  WorkerGroup out;
  out.attempt = g.attempt;
  out.expected_workers = static_cast<int>(g.processes.size());
  out.stopping = g.stopping;
  out.layout = g.layout;
  out.spec_hash = g.spec_hash;
  if (g.total_steps > 0) out.total_steps = g.total_steps;
  if (g.launch_unix_seconds > 0) out.launch_unix_seconds = g.launch_unix_seconds;
  for (const Process& p : g.processes) {
    WorkerState w;
    w.node_rank = p.node_rank;
    if (!p.exited) {
      w.phase = WorkerPhase::kRunning;
    } else {
      w.exit_code = p.exit_code;
      w.phase = p.exit_code == 0 ? WorkerPhase::kSucceeded : WorkerPhase::kFailed;
      if (p.exit_code != 0) {
        // A signal is said as one (exit code 137 read as the worker's own
        // code), and the line is the failing rank's, not the supervisor's
        // closing summary.
        const char* signal_name = p.term_signal != 0 ? ::sigabbrev_np(p.term_signal) : nullptr;
        w.message =
            (signal_name != nullptr
                 ? "killed by SIG" + std::string(signal_name) + "; its log last said: "
                 : std::string()) +
            (signal_name != nullptr ? LastLogLine(p.log_path) : WorkerFailureLine(p.log_path)) +
            " (log: " + p.log_path + ")";
      }
    }
    out.workers.push_back(std::move(w));
  }
  return std::optional<WorkerGroup>(std::move(out));
}

Status ProcessLauncher::Stop(const JobRef& job, StopMode mode) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(job.key());
  if (it == groups_.end()) return Status::Ok();
  Group& g = it->second;
  if (mode == StopMode::kGraceful) {
    ReapLocked(g);
    for (Process& p : g.processes) {
      // Once: a second SIGTERM is the worker's "kill the ranks now" (a
      // Ctrl-C during a re-plan's stop lost the steps since the last
      // checkpoint).
      if (p.exited || p.term_sent) continue;
      ::kill(-p.pid, SIGTERM);
      p.term_sent = true;
      p.term_sent_at = std::chrono::steady_clock::now();
    }
    g.stopping = true;
    return Status::Ok();
  }
  KillLocked(g);
  groups_.erase(it);
  return Status::Ok();
}

std::vector<int> ProcessLauncher::MetricsPorts(const JobRef& job) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> ports;
  auto it = groups_.find(job.key());
  if (it == groups_.end()) return ports;
  ReapLocked(it->second);  // an exited worker has no endpoint to scrape
  for (const Process& p : it->second.processes) {
    if (!p.exited) ports.insert(ports.end(), p.metrics_ports.begin(), p.metrics_ports.end());
  }
  return ports;
}

std::string ProcessLauncher::LogPath(const JobRef& job, int node_rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(job.key());
  if (it == groups_.end()) return "";
  for (const Process& p : it->second.processes) {
    if (p.node_rank == node_rank) return p.log_path;
  }
  return "";
}

}  // namespace pacer::controller
