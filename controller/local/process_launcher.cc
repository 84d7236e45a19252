#include "local/process_launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "reconcile/worker_env.h"

extern char** environ;

namespace pacer::controller {
namespace {

bool PortFree(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// The last non-empty line of a worker's log: usually why it failed.
std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  if (last.size() > 300) last = last.substr(0, 300) + "...";
  return last;
}

}  // namespace

StatusOr<int> FindFreePorts(int count) {
  // Start from an ephemeral port the kernel picks, then look for a run.
  for (int attempt = 0; attempt < 64; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return UnavailableError(std::string("socket: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = 0;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    int base = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      base = ntohs(addr.sin_port);
    }
    ::close(fd);
    if (base == 0 || base + count > 65535) continue;
    bool all = true;
    for (int p = base; p < base + count && all; ++p) all = PortFree(p);
    if (all) return base;
  }
  return UnavailableError("no run of " + std::to_string(count) + " free TCP ports on 127.0.0.1");
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
    return FailedPreconditionError("attempt " + std::to_string(it->second.attempt) + " of " +
                                   spec.job.key() + " is still running");
  }
  const planner::Layout& layout = spec.plan.layout;
  std::error_code ec;
  const std::filesystem::path logs = std::filesystem::path(options_.work_dir) / "logs";
  const std::filesystem::path checkpoints =
      std::filesystem::path(options_.work_dir) / "checkpoints";
  std::filesystem::create_directories(logs, ec);
  std::filesystem::create_directories(checkpoints, ec);
  if (ec) return UnavailableError("cannot create " + logs.string() + ": " + ec.message());

  ASSIGN_OR_RETURN(int master_port, FindFreePorts(1));
  ASSIGN_OR_RETURN(int metrics_base, FindFreePorts(layout.gpus()));

  Group group;
  group.attempt = spec.attempt;
  group.layout = layout;
  for (int node = 0; node < layout.nodes; ++node) {
    WorkerEnvOptions env_options;
    env_options.master_addr = "127.0.0.1";
    env_options.master_port = master_port;
    env_options.checkpoint_dir = checkpoints.string();
    env_options.metrics_port = metrics_base + node * layout.gpus_per_node;
    env_options.backend = options_.backend;
    env_options.scale = options_.scale;
    std::map<std::string, std::string> env = WorkerEnvironment(spec, node, env_options);

    // The parent's environment (PATH, LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES,
    // ...) plus the contract, which wins.
    std::vector<std::string> entries;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry(*e);
      const std::string name = entry.substr(0, entry.find('='));
      if (env.count(name) == 0) entries.push_back(std::move(entry));
    }
    for (const auto& [k, v] : env) entries.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (std::string& e : entries) envp.push_back(e.data());
    envp.push_back(nullptr);

    Process p;
    p.node_rank = node;
    p.log_path = (logs / ("attempt-" + std::to_string(spec.attempt) + "-node-" +
                          std::to_string(node) + ".log"))
                     .string();
    for (int r = 0; r < layout.gpus_per_node; ++r)
      p.metrics_ports.push_back(env_options.metrics_port + r);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, p.log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // A process group of its own: the terminal's Ctrl-C is pacer run's to handle.
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    std::string binary = options_.worker_binary;
    std::string run = "run";
    char* argv[] = {binary.data(), run.data(), nullptr};
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, binary.c_str(), &actions, &attr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      KillLocked(group);
      return UnavailableError("cannot start " + binary + ": " + std::strerror(rc) +
                              " (set --worker-binary to the pacer-worker program)");
    }
    p.pid = pid;
    group.processes.push_back(std::move(p));
  }
  groups_[spec.job.key()] = std::move(group);
  return Status::Ok();
}

void ProcessLauncher::ReapLocked(Group& group) {
  for (Process& p : group.processes) {
    if (p.exited || p.pid <= 0) continue;
    int status = 0;
    const pid_t r = ::waitpid(p.pid, &status, WNOHANG);
    if (r == p.pid) {
      p.exited = true;
      p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    } else if (r < 0 && errno == ECHILD) {
      p.exited = true;  // reaped elsewhere; nothing more to learn
      p.exit_code = 1;
    }
  }
}

void ProcessLauncher::KillLocked(Group& group) {
  ReapLocked(group);
  for (Process& p : group.processes) {
    if (!p.exited) ::kill(p.pid, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.kill_grace;
  for (Process& p : group.processes) {
    while (!p.exited) {
      int status = 0;
      const pid_t r = ::waitpid(p.pid, &status, WNOHANG);
      if (r == p.pid || (r < 0 && errno == ECHILD)) {
        p.exited = true;
        p.exit_code = r == p.pid && WIFEXITED(status) ? WEXITSTATUS(status) : 137;
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(p.pid, SIGKILL);
        ::waitpid(p.pid, &status, 0);
        p.exited = true;
        p.exit_code = 137;
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
  for (const Process& p : g.processes) {
    WorkerState w;
    w.node_rank = p.node_rank;
    if (!p.exited) {
      w.phase = WorkerPhase::kRunning;
    } else {
      w.exit_code = p.exit_code;
      w.phase = p.exit_code == 0 ? WorkerPhase::kSucceeded : WorkerPhase::kFailed;
      if (p.exit_code != 0) w.message = LastLine(p.log_path) + " (log: " + p.log_path + ")";
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
      if (!p.exited) ::kill(p.pid, SIGTERM);
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
