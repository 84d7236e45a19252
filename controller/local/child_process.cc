#include "local/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace pacer::controller {
namespace {

// Binds an IPv4 loopback socket to `port` (0 = the kernel picks); returns the
// bound port, or 0 when it is taken.
int BindLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int bound = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    bound = ntohs(addr.sin_port);
  }
  ::close(fd);
  return bound;
}

}  // namespace

StatusOr<int> FindFreePortRun(int count, const std::set<int>& taken) {
  if (count < 1) return InvalidArgumentError("a port run needs at least one port");
  // Start from a port the kernel picks, which is free and unlikely to be
  // someone else's next choice, and check the run above it.
  for (int attempt = 0; attempt < 128; ++attempt) {
    const int base = BindLoopback(0);
    if (base == 0 || base + count > 65535) continue;
    bool all = true;
    for (int p = base; p < base + count && all; ++p) {
      all = taken.count(p) == 0 && BindLoopback(p) == p;
    }
    if (all) return base;
  }
  return UnavailableError(
      "found no run of " + std::to_string(count) +
      " free TCP ports on 127.0.0.1 in 128 tries; is the machine out of ports?");
}

StatusOr<pid_t> SpawnProcess(const std::string& binary, const std::vector<std::string>& args,
                             const std::map<std::string, std::string>& env,
                             const std::string& log_path, LogMode log_mode,
                             const std::vector<int>& inherited_fds) {
  std::vector<std::string> entries;
  entries.reserve(env.size());
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage;
  argv_storage.push_back(binary);
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(
      &actions, STDOUT_FILENO, log_path.c_str(),
      O_WRONLY | O_CREAT | (log_mode == LogMode::kAppend ? O_APPEND : O_TRUNC), 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  for (const int fd : inherited_fds) {
    if (fd > STDERR_FILENO) posix_spawn_file_actions_adddup2(&actions, fd, fd);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // SIGPIPE back to its default: `pacer run` ignores it for itself, and an
  // ignored signal stays ignored across exec (a worker would write on to a
  // dead peer here and die of it in a pod).
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, binary.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return UnavailableError("cannot start " + binary + ": " + std::strerror(rc));
  }
  return pid;
}

namespace {

std::string CutForMessage(std::string line) {
  if (line.size() > 300) line = line.substr(0, 300) + "...";
  return line;
}

}  // namespace

std::string LastLogLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return CutForMessage(std::move(last));
}

std::string WorkerFailureLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last, first_failed;
  while (std::getline(in, line)) {
    if (line.rfind("==== pacer run:", 0) == 0) {
      last.clear();
      first_failed.clear();
      continue;
    }
    if (line.empty()) continue;
    last = line;
    if (first_failed.empty() && line.find(" event=failed ") != std::string::npos) {
      first_failed = line;
    }
  }
  return CutForMessage(first_failed.empty() ? last : first_failed);
}

}  // namespace pacer::controller
