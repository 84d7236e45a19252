#include "core/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "core/exit_codes.h"

namespace pacer::worker {
namespace {

using Clock = std::chrono::steady_clock;

// The write end of the self-pipe, read by the signal handler. An atomic int
// is lock-free, hence async-signal-safe; -1 while no supervisor runs.
std::atomic<int> g_wake_fd{-1};
static_assert(std::atomic<int>::is_always_lock_free);

constexpr int kHandledSignals[] = {SIGTERM, SIGINT, SIGCHLD};

// Does the least a handler can: one write(2), which is async-signal-safe.
// The supervisor's loop reads the signal number from the pipe.
void OnSignal(int signo) {
  const int saved_errno = errno;
  const int fd = g_wake_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const auto byte = static_cast<unsigned char>(signo);
    // Non-blocking: if the pipe were ever full the loop is awake anyway.
    [[maybe_unused]] ssize_t ignored = write(fd, &byte, 1);
  }
  errno = saved_errno;
}

// One line per event, written with a single write(2) so that lines from the
// supervisor and its ranks do not interleave mid-line.
void Log(const char* level, const char* format, ...) __attribute__((format(printf, 2, 3)));
void Log(const char* level, const char* format, ...) {
  char line[512];
  int n = std::snprintf(line, sizeof(line), "level=%s component=supervisor pid=%d ", level,
                        static_cast<int>(getpid()));
  va_list args;
  va_start(args, format);
  if (n > 0 && static_cast<std::size_t>(n) < sizeof(line)) {
    int m = std::vsnprintf(line + n, sizeof(line) - static_cast<std::size_t>(n), format, args);
    if (m > 0) n += m;
  }
  va_end(args);
  std::size_t len = std::min(static_cast<std::size_t>(std::max(n, 0)), sizeof(line) - 2);
  line[len++] = '\n';
  [[maybe_unused]] ssize_t ignored = write(STDERR_FILENO, line, len);
}

std::string SignalName(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return abbrev != nullptr ? std::string("SIG") + abbrev : std::to_string(signo);
}

// Installs the self-pipe handlers for the supervisor's lifetime and restores
// the caller's handlers on destruction.
class SignalPipe {
 public:
  bool Install() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
    read_fd_ = fds[0];
    write_fd_ = fds[1];
    int expected = -1;
    if (!g_wake_fd.compare_exchange_strong(expected, write_fd_)) {
      Log("error", "event=error error=\"another supervisor is already running in this process\"");
      return false;
    }
    owns_global_ = true;
    for (std::size_t i = 0; i < std::size(kHandledSignals); ++i) {
      struct sigaction action {};
      action.sa_handler = OnSignal;
      sigemptyset(&action.sa_mask);
      // SA_RESTART keeps unrelated blocking calls going; poll() still wakes.
      action.sa_flags = SA_RESTART | (kHandledSignals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
      sigaction(kHandledSignals[i], &action, &previous_[i]);
    }
    installed_ = true;
    return true;
  }

  // In a freshly forked child: give rank_main the process as the caller had it.
  void ResetInChild() {
    for (std::size_t i = 0; i < std::size(kHandledSignals); ++i) {
      sigaction(kHandledSignals[i], &previous_[i], nullptr);
    }
    g_wake_fd.store(-1);
    close(read_fd_);
    close(write_fd_);
  }

  ~SignalPipe() {
    if (installed_) {
      for (std::size_t i = 0; i < std::size(kHandledSignals); ++i) {
        sigaction(kHandledSignals[i], &previous_[i], nullptr);
      }
    }
    if (owns_global_) g_wake_fd.store(-1);
    if (read_fd_ >= 0) close(read_fd_);
    if (write_fd_ >= 0) close(write_fd_);
  }

  int read_fd() const { return read_fd_; }

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  bool owns_global_ = false;
  bool installed_ = false;
  struct sigaction previous_[std::size(kHandledSignals)]{};
};

struct Child {
  int local_rank = 0;
  pid_t pid = -1;
  bool running = true;
};

struct Outcome {
  int local_rank = 0;
  int code = 0;
};

// A failure that is the symptom of another rank's: the store or a peer gone
// (rank 0 hosts the store, and its process leaves with it), a collective cut
// short. On one node, the rank that had the cause often exits a moment after
// its sibling noticed the symptom.
bool IsSymptom(int code) {
  return code == kExitRendezvousTimeout || code == kExitCollectiveFailure;
}

// A failure with a cause of its own, which the controller acts on (fail the
// job with the message, raise the memory margin, exclude the node, stop on
// data loss): it decides the node's code over a symptom reported first.
bool IsCause(int code) {
  return code == kExitInvalidConfig || code == kExitOutOfMemory || code == kExitCheckpointFailure ||
         code == kExitDataLoss || code == kExitDeviceFault;
}

// Runs in the forked child; never returns.
[[noreturn]] void RunChild(int local_rank, const std::function<int(int)>& rank_main,
                           pid_t supervisor_pid, SignalPipe& signals, const sigset_t& caller_mask) {
  signals.ResetInChild();
  // If the supervisor dies (SIGKILL after the kubelet's grace period, a
  // crash), nothing would reap or stop this rank: let the kernel kill it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != supervisor_pid) _exit(kExitInternalError);  // it died before prctl
  // SIGTERM and SIGINT stay blocked: a stop forwarded while the rank is
  // still starting must wait for the rank's own handler (StopSignal unblocks
  // them) instead of killing it half-started with the default action.
  sigset_t rank_mask = caller_mask;
  sigaddset(&rank_mask, SIGTERM);
  sigaddset(&rank_mask, SIGINT);
  pthread_sigmask(SIG_SETMASK, &rank_mask, nullptr);
  int code = kExitInternalError;
  try {
    code = rank_main(local_rank);
  } catch (const std::exception& e) {
    Log("error", "event=rank-threw local_rank=%d error=\"%s\"", local_rank, e.what());
  } catch (...) {
    Log("error", "event=rank-threw local_rank=%d error=\"unknown exception\"", local_rank);
  }
  // _exit skips atexit handlers and static destructors, which belong to the
  // parent's state that fork copied; flush only what the rank printed.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(code);
}

}  // namespace

int RunSupervised(int local_world_size, const std::function<int(int local_rank)>& rank_main,
                  const SupervisorOptions& options) {
  if (local_world_size < 1) {
    Log("error", "event=error error=\"local world size %d is not positive\"", local_world_size);
    return kExitInvalidConfig;
  }
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(std::max(s, 0.0)));
  };
  const auto grace = seconds(options.stop_grace_seconds);
  const double failure_grace_seconds =
      std::min(options.stop_grace_seconds, options.failure_grace_seconds);
  const auto failure_grace = seconds(failure_grace_seconds);
  const auto repeat_window = seconds(options.repeat_signal_window_seconds);
  const int parent_poll_ms =
      static_cast<int>(std::clamp(options.parent_poll_seconds * 1000.0, 1.0, 3'600'000.0));

  SignalPipe signals;
  if (!signals.Install()) {
    Log("error", "event=error error=\"cannot install signal handlers: %s\"", std::strerror(errno));
    return kExitInternalError;
  }

  // Block our signals while forking: a child must not run OnSignal (it would
  // write into the supervisor's pipe) before it has reset its handlers.
  sigset_t ours;
  sigemptyset(&ours);
  for (int signo : kHandledSignals) sigaddset(&ours, signo);
  sigset_t caller_mask;
  pthread_sigmask(SIG_BLOCK, &ours, &caller_mask);

  // Buffered output would otherwise be flushed once per child as well.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);

  const pid_t supervisor_pid = getpid();
  std::vector<Child> children;
  std::optional<Outcome> first_failure;
  for (int r = 0; r < local_world_size; ++r) {
    const pid_t pid = fork();
    if (pid == 0) RunChild(r, rank_main, supervisor_pid, signals, caller_mask);
    if (pid < 0) {
      Log("error", "event=fork-failed local_rank=%d error=\"%s\"", r, std::strerror(errno));
      first_failure = Outcome{r, kExitInternalError};
      break;
    }
    children.push_back(Child{r, pid, true});
    Log("info", "event=rank-started local_rank=%d rank_pid=%d", r, static_cast<int>(pid));
  }

  // While supervising, our signals must be deliverable even if the caller
  // had them blocked.
  sigset_t supervising_mask = caller_mask;
  for (int signo : kHandledSignals) sigdelset(&supervising_mask, signo);
  pthread_sigmask(SIG_SETMASK, &supervising_mask, nullptr);

  bool stopping = false;
  bool stop_by_signal = false;
  bool killed = false;
  bool any_stopped_after_checkpoint = false;
  Clock::time_point kill_at{};
  Clock::time_point first_stop_signal_at{};

  auto running_count = [&] {
    return std::count_if(children.begin(), children.end(),
                         [](const Child& c) { return c.running; });
  };
  auto begin_stop = [&](const char* cause) {
    if (stopping) return;
    stopping = true;
    // A rank that stopped at a checkpoint (exit 6: the stop reached this node
    // through the store) is no failure: its siblings are writing theirs.
    const bool failed =
        first_failure.has_value() && first_failure->code != kExitStoppedAfterCheckpoint;
    kill_at = Clock::now() + (failed ? failure_grace : grace);
    Log("warn", "event=stopping-ranks cause=%s signal=SIGTERM running=%d grace_s=%g", cause,
        static_cast<int>(running_count()),
        failed ? failure_grace_seconds : options.stop_grace_seconds);
    for (const Child& c : children) {
      if (c.running) kill(c.pid, SIGTERM);
    }
  };
  auto kill_all = [&](const char* cause) {
    killed = true;
    for (const Child& c : children) {
      if (!c.running) continue;
      Log("warn", "event=killing-rank cause=%s local_rank=%d rank_pid=%d signal=SIGKILL", cause,
          c.local_rank, static_cast<int>(c.pid));
      kill(c.pid, SIGKILL);
    }
  };

  if (first_failure) begin_stop("fork-failed");

  // The parent named: our own (getppid() tells when it is gone), or one
  // further up (a wrapper script that runs pacer-worker without exec stands
  // between): a pidfd on it then, readable once it exits. Taking "not our
  // parent" for "gone" stopped every launch through such a wrapper at once.
  const bool parent_direct = options.parent_pid > 0 && getppid() == options.parent_pid;
  int parent_fd = -1;
  bool parent_gone_at_start = false;
  if (options.parent_pid > 0 && !parent_direct) {
    parent_fd = static_cast<int>(syscall(SYS_pidfd_open, options.parent_pid, 0));
    if (parent_fd < 0 && errno == ESRCH) {
      parent_gone_at_start = true;
    } else if (parent_fd < 0) {
      Log("warn", "event=parent-watch-unavailable parent_pid=%d error=\"pidfd_open: %s\"",
          options.parent_pid, std::strerror(errno));
    }
  }
  auto parent_gone = [&] {
    if (options.parent_pid <= 0) return false;
    if (parent_direct) return getppid() != options.parent_pid;
    if (parent_gone_at_start) return true;
    if (parent_fd < 0) return false;
    pollfd exited{parent_fd, POLLIN, 0};
    return poll(&exited, 1, 0) > 0;
  };

  while (running_count() > 0) {
    if (!stopping && parent_gone()) {
      // `pacer run` is gone (SIGKILL, the OOM killer): we were re-parented,
      // or its pidfd says it exited. Nothing else would ever stop these
      // ranks or free their devices.
      Log("warn", "event=parent-exited parent_pid=%d", options.parent_pid);
      stop_by_signal = true;
      begin_stop("parent-exited");
    }
    int timeout_ms = -1;  // SIGCHLD wakes us when a rank exits
    if (options.parent_pid > 0 && !stopping) timeout_ms = parent_poll_ms;
    if (stopping && !killed) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(kill_at - Clock::now());
      if (left.count() <= 0) {
        kill_all("grace-period-expired");
        continue;
      }
      timeout_ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    }
    pollfd wake{signals.read_fd(), POLLIN, 0};
    if (poll(&wake, 1, timeout_ms) < 0 && errno != EINTR) {
      Log("error", "event=error error=\"poll: %s\"", std::strerror(errno));
    }

    unsigned char received[64];
    ssize_t n;
    while ((n = read(signals.read_fd(), received, sizeof(received))) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        const int signo = received[i];
        if (signo != SIGTERM && signo != SIGINT) continue;  // SIGCHLD: reaped below
        if (!stopping) {
          Log("info", "event=stop-signal signal=%s", SignalName(signo).c_str());
          stop_by_signal = true;
          first_stop_signal_at = Clock::now();
          begin_stop("stop-signal");
        } else if (stop_by_signal && Clock::now() - first_stop_signal_at < repeat_window) {
          Log("info", "event=stop-signal signal=%s note=\"the same stop (repeated within %gs)\"",
              SignalName(signo).c_str(), options.repeat_signal_window_seconds);
        } else if (!killed) {
          Log("info", "event=stop-signal signal=%s note=\"second stop signal: killing ranks now\"",
              SignalName(signo).c_str());
          kill_all("second-stop-signal");
        }
      }
    }

    for (Child& c : children) {
      if (!c.running) continue;
      int wstatus = 0;
      pid_t got;
      do {
        got = waitpid(c.pid, &wstatus, WNOHANG);
      } while (got < 0 && errno == EINTR);
      if (got == 0) continue;
      c.running = false;
      int code = kExitInternalError;
      if (got < 0) {
        Log("error", "event=rank-lost local_rank=%d rank_pid=%d error=\"waitpid: %s\"",
            c.local_rank, static_cast<int>(c.pid), std::strerror(errno));
      } else if (WIFEXITED(wstatus)) {
        code = WEXITSTATUS(wstatus);
        Log(code == kExitSuccess || code == kExitStoppedAfterCheckpoint ? "info" : "error",
            "event=rank-exited local_rank=%d rank_pid=%d exit_code=%d reason=%s", c.local_rank,
            static_cast<int>(c.pid), code, ExitCodeName(code));
      } else {
        const int signo = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
        Log("warn", "event=rank-killed local_rank=%d rank_pid=%d signal=%s exit_code=%d reason=%s",
            c.local_rank, static_cast<int>(c.pid), SignalName(signo).c_str(), code,
            ExitCodeName(code));
      }
      if (code == kExitStoppedAfterCheckpoint) any_stopped_after_checkpoint = true;
      if (first_failure) {
        // Only the first failure decides the result, unless it was the
        // symptom of this one (a sibling that lost rank 0's store as rank 0
        // left with its own cause).
        if (!stop_by_signal && IsSymptom(first_failure->code) && IsCause(code)) {
          Log("info",
              "event=cause-found local_rank=%d exit_code=%d reason=%s replaces=%s "
              "first_failed_local_rank=%d",
              c.local_rank, code, ExitCodeName(code), ExitCodeName(first_failure->code),
              first_failure->local_rank);
          first_failure = Outcome{c.local_rank, code};
        }
        continue;
      }
      if (!stopping) {
        // Any non-zero exit ends the node's run, kExitStoppedAfterCheckpoint
        // included: the siblings cannot go on without this rank.
        if (code != kExitSuccess) {
          first_failure = Outcome{c.local_rank, code};
          begin_stop("rank-failed");
        }
      } else if (stop_by_signal && code != kExitSuccess && code != kExitStoppedAfterCheckpoint) {
        first_failure = Outcome{c.local_rank, code};
      }
    }
  }
  if (parent_fd >= 0) close(parent_fd);

  pthread_sigmask(SIG_SETMASK, &caller_mask, nullptr);

  int result = kExitSuccess;
  if (first_failure) {
    result = first_failure->code;
    Log("error", "event=done exit_code=%d reason=%s first_failed_local_rank=%d", result,
        ExitCodeName(result), first_failure->local_rank);
  } else {
    if (stop_by_signal && any_stopped_after_checkpoint) result = kExitStoppedAfterCheckpoint;
    Log("info", "event=done exit_code=%d reason=%s", result, ExitCodeName(result));
  }
  return result;
}

}  // namespace pacer::worker
