#include "core/supervisor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/exit_codes.h"
#include "core/signals.h"

namespace pacer::worker {
namespace {

// Every test runs the supervisor in a forked child, so that its signal
// handlers and its children never touch the test runner. The child arms
// alarm() first: a supervisor that hangs dies of SIGALRM and the test fails
// instead of hanging. Ranks arm a longer one of their own, and the supervisor
// makes the kernel kill them if it dies, so nothing outlives a test.
constexpr unsigned kSupervisorWatchdogSeconds = 60;
constexpr unsigned kRankWatchdogSeconds = 120;
// SIGALRM from the watchdog shows up as this "exit code".
constexpr int kKilledBySignalBase = 1000;

class SupervisorDir {
 public:
  SupervisorDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pacer-supervisor-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~SupervisorDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void Touch(const std::string& path) {
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
}

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

// A pipe through which ranks tell the test (or a sibling) they are ready.
class Pipe {
 public:
  Pipe() {
    if (pipe2(fds_, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  }
  ~Pipe() {
    close(fds_[0]);
    close(fds_[1]);
  }
  void Signal() const {
    char byte = 1;
    while (write(fds_[1], &byte, 1) < 0 && errno == EINTR) {
    }
  }
  // Whether a byte waits to be read (none is taken).
  bool HasData() const {
    pollfd p{fds_[0], POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }
  // Blocking read of n bytes, for ranks (their alarm bounds it).
  bool AwaitInRank(int n) const {
    for (int got = 0; got < n;) {
      char byte;
      ssize_t r = read(fds_[0], &byte, 1);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      ++got;
    }
    return true;
  }
  // Reads n bytes in the test process, giving up after a generous deadline.
  bool AwaitInTest(int n) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (int got = 0; got < n;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fds_[0], POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char byte;
      if (read(fds_[0], &byte, 1) == 1) ++got;
    }
    return true;
  }

 private:
  int fds_[2];
};

// Tests of the second stop signal send it right after the first: no window
// in which it would count as the same stop.
SupervisorOptions Options(double stop_grace_seconds) {
  SupervisorOptions options;
  options.stop_grace_seconds = stop_grace_seconds;
  options.repeat_signal_window_seconds = 0;
  return options;
}

pid_t StartSupervisorWith(int local_world_size, std::function<int(int)> rank_main,
                          const SupervisorOptions& options, int stderr_fd = -1) {
  std::cout.flush();
  std::fflush(nullptr);  // or the child would print the runner's buffered output again
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(kSupervisorWatchdogSeconds);
    if (stderr_fd >= 0) dup2(stderr_fd, STDERR_FILENO);
    _exit(RunSupervised(local_world_size, rank_main, options));
  }
  return pid;
}

pid_t StartSupervisor(int local_world_size, std::function<int(int)> rank_main,
                      double stop_grace_seconds = 10.0) {
  return StartSupervisorWith(local_world_size, std::move(rank_main), Options(stop_grace_seconds));
}

// The supervisor's exit code, or kKilledBySignalBase + signal.
int WaitForSupervisor(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return kKilledBySignalBase + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int RunAndWait(int local_world_size, std::function<int(int)> rank_main,
               double stop_grace_seconds = 10.0) {
  return WaitForSupervisor(
      StartSupervisor(local_world_size, std::move(rank_main), stop_grace_seconds));
}

// A rank that takes the forwarded SIGTERM: blocks it (no window in which it
// could kill the rank), says it is running, waits for it, says it got it
// (when asked to).
void TakeSigterm(const Pipe& ready, const Pipe* got_sigterm) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  ready.Signal();
  int signo = 0;
  sigwait(&term, &signo);
  if (got_sigterm != nullptr) got_sigterm->Signal();
}

// What a real rank does on SIGTERM, reduced to its essence: announce it is
// running, wait for SIGTERM (blocked, then taken with sigwait, so there is no
// window in which it could kill the rank), leave a marker that proves it got
// it, and report a clean stop.
int WaitForSigterm(const SupervisorDir& dir, const Pipe& ready, int local_rank) {
  alarm(kRankWatchdogSeconds);
  TakeSigterm(ready, nullptr);
  Touch(dir.File("sigterm-" + std::to_string(local_rank)));
  return kExitStoppedAfterCheckpoint;
}

TEST(SupervisorTest, AllRanksSucceed) {
  SupervisorDir dir;
  const int code = RunAndWait(4, [&](int local_rank) -> int {
    Touch(dir.File("ran-" + std::to_string(local_rank)));
    return kExitSuccess;
  });
  EXPECT_EQ(code, kExitSuccess);
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(Exists(dir.File("ran-" + std::to_string(r)))) << r;
}

TEST(SupervisorTest, FailingRankStopsTheOthersAndDecidesTheExitCode) {
  SupervisorDir dir;
  Pipe ready;
  const int code = RunAndWait(4, [&](int local_rank) -> int {
    if (local_rank == 2) {
      alarm(kRankWatchdogSeconds);
      // Fail only once the others are provably waiting for SIGTERM.
      if (!ready.AwaitInRank(3)) return kExitInternalError;
      return kExitCollectiveFailure;
    }
    return WaitForSigterm(dir, ready, local_rank);
  });
  EXPECT_EQ(code, kExitCollectiveFailure) << ExitCodeName(code);
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(Exists(dir.File("sigterm-" + std::to_string(r)))) << "rank " << r;
  }
  EXPECT_FALSE(Exists(dir.File("sigterm-2")));
}

TEST(SupervisorTest, ACauseAfterItsSymptomDecidesTheExitCode) {
  // Rank 0 fails (out of memory) and its process takes the store along;
  // rank 1 notices first and exits 4. The node's code is rank 0's cause,
  // which the controller acts on (another plan), not the symptom (a retry).
  Pipe ready;
  const int code = RunAndWait(3, [&](int local_rank) -> int {
    alarm(kRankWatchdogSeconds);
    if (local_rank == 1) {
      if (!ready.AwaitInRank(2)) return kExitInternalError;
      return kExitCollectiveFailure;
    }
    // Exits after the symptom is recorded: the SIGTERM comes from it.
    TakeSigterm(ready, nullptr);
    return local_rank == 0 ? kExitOutOfMemory : kExitStoppedAfterCheckpoint;
  });
  EXPECT_EQ(code, kExitOutOfMemory) << ExitCodeName(code);
}

TEST(SupervisorTest, ASecondSymptomOrCrashDoesNotReplaceTheFirstFailure) {
  // Only a cause replaces a symptom: another symptom, or a sibling killed
  // (its code is internal-error whoever sent the signal), does not.
  Pipe ready;
  const int code = RunAndWait(3, [&](int local_rank) -> int {
    alarm(kRankWatchdogSeconds);
    if (local_rank == 1) {
      if (!ready.AwaitInRank(2)) return kExitInternalError;
      return kExitRendezvousTimeout;
    }
    TakeSigterm(ready, nullptr);
    if (local_rank == 2) raise(SIGKILL);
    return kExitCollectiveFailure;
  });
  EXPECT_EQ(code, kExitRendezvousTimeout) << ExitCodeName(code);
}

TEST(SupervisorTest, RankKilledBySignalIsAFailureAndStopsTheOthers) {
  SupervisorDir dir;
  Pipe ready;
  const int code = RunAndWait(4, [&](int local_rank) -> int {
    if (local_rank == 1) {
      alarm(kRankWatchdogSeconds);
      if (!ready.AwaitInRank(3)) return kExitInternalError;
      raise(SIGKILL);  // what the OOM killer or `kill -9` would do
      return kExitSuccess;
    }
    return WaitForSigterm(dir, ready, local_rank);
  });
  EXPECT_EQ(code, kExitInternalError) << ExitCodeName(code);
  for (int r : {0, 2, 3}) {
    EXPECT_TRUE(Exists(dir.File("sigterm-" + std::to_string(r)))) << "rank " << r;
  }
}

TEST(SupervisorTest, SigtermIsForwardedAndCleanStopsAreReported) {
  SupervisorDir dir;
  Pipe ready;
  const pid_t supervisor = StartSupervisor(
      4, [&](int local_rank) -> int { return WaitForSigterm(dir, ready, local_rank); });
  ASSERT_GT(supervisor, 0);
  // The supervisor installs its handlers before it forks, so once every rank
  // is running a SIGTERM reaches the handler.
  ASSERT_TRUE(ready.AwaitInTest(4));
  ASSERT_EQ(kill(supervisor, SIGTERM), 0);
  const int code = WaitForSupervisor(supervisor);
  EXPECT_EQ(code, kExitStoppedAfterCheckpoint) << ExitCodeName(code);
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(Exists(dir.File("sigterm-" + std::to_string(r)))) << "rank " << r;
  }
}

// A rank fails; its sibling ignores SIGTERM and is killed after the grace:
// the lesser of the stop grace and the failure grace. After a rank failed its
// siblings cannot finish a step, so the stop grace the controller sets to
// minutes does not apply (a crash was reported minutes late, and peers on
// other nodes failed first and were blamed).
TEST(SupervisorTest, RankThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  for (const auto& [stop_grace, failure_grace] : {std::pair{0.2, 25.0}, std::pair{1000.0, 0.2}}) {
    SCOPED_TRACE(stop_grace);
    Pipe ready;
    SupervisorOptions options = Options(stop_grace);
    options.failure_grace_seconds = failure_grace;
    const int code = WaitForSupervisor(StartSupervisorWith(
        2,
        [&](int local_rank) -> int {
          if (local_rank == 0) {
            alarm(kRankWatchdogSeconds);
            if (!ready.AwaitInRank(1)) return kExitInternalError;
            return kExitCheckpointFailure;
          }
          // No alarm here: only the supervisor's SIGKILL (or, should the
          // supervisor hang and die of its watchdog, the parent-death
          // signal) ends this rank.
          sigset_t term;
          sigemptyset(&term);
          sigaddset(&term, SIGTERM);
          pthread_sigmask(SIG_BLOCK, &term, nullptr);
          ready.Signal();
          for (;;) pause();
        },
        options));
    // RunSupervised returns only after reaping every rank, so returning at
    // all (before the watchdog) proves the straggler was killed; the code is
    // still the first failure's.
    EXPECT_EQ(code, kExitCheckpointFailure) << ExitCodeName(code);
  }
}

TEST(SupervisorTest, SecondStopSignalKillsRanksWithoutWaitingForTheGrace) {
  SupervisorDir dir;
  Pipe ready;
  Pipe got_sigterm;
  // A 1000 s grace: the test can only finish if the second signal cuts it short.
  const pid_t supervisor = StartSupervisor(
      2,
      [&](int) -> int {
        TakeSigterm(ready, &got_sigterm);  // ...and then ignore it, like a rank stuck in a step
        for (;;) pause();
      },
      /*stop_grace_seconds=*/1000.0);
  ASSERT_GT(supervisor, 0);
  ASSERT_TRUE(ready.AwaitInTest(2));
  ASSERT_EQ(kill(supervisor, SIGTERM), 0);
  // Wait until the first signal was handled (the ranks got the forwarded
  // SIGTERM), so the second cannot merge with it while pending.
  ASSERT_TRUE(got_sigterm.AwaitInTest(2));
  ASSERT_EQ(kill(supervisor, SIGINT), 0);
  const int code = WaitForSupervisor(supervisor);
  // The killed ranks did not stop cleanly.
  EXPECT_EQ(code, kExitInternalError) << ExitCodeName(code);
}

// A service manager or batch system signals every process of a job (`pacer
// run` and its worker), and `pacer run` then forwards its own SIGTERM: a
// second signal within the window is the same stop, not "kill the ranks
// now" (which lost the steps since the last checkpoint).
TEST(SupervisorTest, AStopSignalRepeatedWithinTheWindowIsTheSameStop) {
  Pipe ready;
  Pipe got_sigterm;
  Pipe proceed;
  int log[2];
  ASSERT_EQ(pipe2(log, O_CLOEXEC), 0);
  SupervisorOptions options;
  options.stop_grace_seconds = 1000;
  options.repeat_signal_window_seconds = 1000;
  const pid_t supervisor = StartSupervisorWith(
      2,
      [&](int) -> int {
        alarm(kRankWatchdogSeconds);
        TakeSigterm(ready, &got_sigterm);
        // Checkpointing: stops cleanly once the test lets it.
        return proceed.AwaitInRank(1) ? kExitStoppedAfterCheckpoint : kExitInternalError;
      },
      options, log[1]);
  close(log[1]);
  ASSERT_GT(supervisor, 0);
  ASSERT_TRUE(ready.AwaitInTest(2));
  ASSERT_EQ(kill(supervisor, SIGTERM), 0);
  ASSERT_TRUE(got_sigterm.AwaitInTest(2));
  ASSERT_EQ(kill(supervisor, SIGTERM), 0);
  // Its log says how it took the second signal, before the ranks may end.
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (text.find("event=stop-signal", text.find("event=stop-signal") + 1) == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    pollfd p{log[0], POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;  // wakes on output; the deadline bounds it
    char buffer[512];
    const ssize_t n = read(log[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  EXPECT_NE(text.find("the same stop"), std::string::npos) << text;
  proceed.Signal();
  proceed.Signal();
  const int code = WaitForSupervisor(supervisor);
  close(log[0]);
  EXPECT_EQ(code, kExitStoppedAfterCheckpoint) << ExitCodeName(code) << "\n" << text;
}

// `pacer run` killed outright (SIGKILL, the OOM killer) cannot stop its
// worker: the worker, re-parented, stops its ranks itself as on SIGTERM,
// instead of training on, unseen, with its devices held.
TEST(SupervisorTest, RanksStopWhenTheParentNamedIsGone) {
  Pipe ready;
  Pipe got_sigterm;
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t parent = fork();
  if (parent == 0) {
    alarm(kSupervisorWatchdogSeconds);
    SupervisorOptions options = Options(10);
    options.parent_pid = getpid();
    options.parent_poll_seconds = 0.02;
    const pid_t supervisor = StartSupervisorWith(
        2,
        [&](int) -> int {
          alarm(kRankWatchdogSeconds);
          TakeSigterm(ready, &got_sigterm);
          return kExitStoppedAfterCheckpoint;
        },
        options);
    // The parent goes once the ranks run, without a word to them.
    _exit(supervisor > 0 && ready.AwaitInRank(2) ? 0 : 1);
  }
  ASSERT_GT(parent, 0);
  EXPECT_EQ(WaitForSupervisor(parent), 0);
  // Both ranks got the stop (the supervisor is no child of ours to wait for).
  EXPECT_TRUE(got_sigterm.AwaitInTest(2));
}

// A wrapper (a script that runs pacer-worker without exec) stands between
// the parent named and the supervisor: the parent is watched still, and not
// being the supervisor's own parent is no stop. Taken for "gone", every
// launch through such a wrapper stopped at once.
TEST(SupervisorTest, AParentNamedBehindAWrapperIsWatchedToo) {
  // pidfd_open (Linux 5.3) may be missing or refused by a seccomp profile;
  // the supervisor then warns and does not watch (parent-watch-unavailable).
  const int probe = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
  if (probe < 0) GTEST_SKIP() << "pidfd_open: " << std::strerror(errno);
  close(probe);
  Pipe ready;
  Pipe parent_killed;
  Pipe stopped_early;
  Pipe stopped_late;
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t named = fork();  // stands in for pacer run
  if (named == 0) {
    alarm(kSupervisorWatchdogSeconds);
    for (;;) pause();
  }
  ASSERT_GT(named, 0);
  SupervisorOptions options = Options(10);
  options.parent_pid = named;
  options.parent_poll_seconds = 0.02;
  const pid_t supervisor = StartSupervisorWith(
      2,
      [&](int) -> int {
        alarm(kRankWatchdogSeconds);
        TakeSigterm(ready, nullptr);
        (parent_killed.HasData() ? stopped_late : stopped_early).Signal();
        return kExitStoppedAfterCheckpoint;
      },
      options);
  ASSERT_GT(supervisor, 0);
  ASSERT_TRUE(ready.AwaitInTest(2));
  parent_killed.Signal();
  ASSERT_EQ(kill(named, SIGKILL), 0);
  int status = 0;
  waitpid(named, &status, 0);
  EXPECT_TRUE(stopped_late.AwaitInTest(2));
  EXPECT_FALSE(stopped_early.HasData()) << "stopped while the parent named was alive";
  const int code = WaitForSupervisor(supervisor);
  EXPECT_EQ(code, kExitStoppedAfterCheckpoint) << ExitCodeName(code);
}

// The grace period is one for all ranks, and ranks 1 and 2 must take the
// SIGTERM and leave their markers within it: a grace of a few seconds, not a
// fraction of one, which two busy cores under a sanitizer can spend before
// a rank wakes. Rank 0 is killed at its end whatever its length.
TEST(SupervisorTest, RankThatNeverTakesTheForwardedSigtermIsNotACleanStop) {
  SupervisorDir dir;
  Pipe ready;
  const pid_t supervisor = StartSupervisor(
      3,
      [&](int local_rank) -> int {
        if (local_rank == 0) {
          // Never installs a handler, so SIGTERM stays blocked (ranks start
          // that way): only the SIGKILL after the grace period ends it.
          ready.Signal();
          for (;;) pause();
        }
        return WaitForSigterm(dir, ready, local_rank);
      },
      /*stop_grace_seconds=*/5.0);
  ASSERT_GT(supervisor, 0);
  ASSERT_TRUE(ready.AwaitInTest(3));
  ASSERT_EQ(kill(supervisor, SIGTERM), 0);
  const int code = WaitForSupervisor(supervisor);
  EXPECT_EQ(code, kExitInternalError) << ExitCodeName(code);
  EXPECT_TRUE(Exists(dir.File("sigterm-1")));
  EXPECT_TRUE(Exists(dir.File("sigterm-2")));
}

// The start-up race: a SIGTERM that reaches a rank before it has installed
// its handler (kubelet deleting a pod that is still starting) must not kill
// it; the rank sees the stop once its StopSignal exists and exits cleanly.
TEST(SupervisorTest, SigtermBeforeTheRankInstalledItsHandlerIsACleanStop) {
  int pid_pipe[2];
  ASSERT_EQ(pipe2(pid_pipe, O_CLOEXEC), 0);
  Pipe go;
  const pid_t supervisor = StartSupervisor(1, [&](int) -> int {
    alarm(kRankWatchdogSeconds);
    const pid_t me = getpid();
    if (write(pid_pipe[1], &me, sizeof(me)) != sizeof(me)) return kExitInternalError;
    // Still starting: no handler yet. The test signals us now.
    if (!go.AwaitInRank(1)) return kExitInternalError;
    StopSignal stop;
    return stop.requested() && stop.signal_number() == SIGTERM ? kExitStoppedAfterCheckpoint
                                                               : kExitSuccess;
  });
  ASSERT_GT(supervisor, 0);
  pid_t rank = 0;
  pollfd p{pid_pipe[0], POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 30000), 1);
  ASSERT_EQ(read(pid_pipe[0], &rank, sizeof(rank)), static_cast<ssize_t>(sizeof(rank)));
  // kill() returns once the signal is pending in (or has been acted on by)
  // the rank, so the rank cannot install its handler before it is sent.
  ASSERT_EQ(kill(rank, SIGTERM), 0);
  go.Signal();
  const int code = WaitForSupervisor(supervisor);
  EXPECT_EQ(code, kExitStoppedAfterCheckpoint) << ExitCodeName(code);
  close(pid_pipe[0]);
  close(pid_pipe[1]);
}

TEST(SupervisorTest, RankThatThrowsIsAnInternalError) {
  const int code = RunAndWait(2, [](int local_rank) -> int {
    if (local_rank == 1) throw std::runtime_error("boom");
    return kExitSuccess;
  });
  EXPECT_EQ(code, kExitInternalError) << ExitCodeName(code);
}

TEST(SupervisorTest, NonPositiveWorldSizeIsInvalidConfig) {
  // Returns before installing handlers or forking, so it is safe in-process.
  EXPECT_EQ(RunSupervised(
                0, [](int) { return 0; }, SupervisorOptions{}),
            kExitInvalidConfig);
}

}  // namespace
}  // namespace pacer::worker
