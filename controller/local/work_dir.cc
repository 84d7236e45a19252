#include "local/work_dir.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "core/resume_point.h"

namespace pacer::controller {
namespace {

// The part of `dir` that is a file where a directory must be (`dir` itself,
// or the deepest part of it that exists), if any.
std::optional<std::filesystem::path> FileInTheWay(const std::filesystem::path& dir) {
  for (std::filesystem::path p = dir; !p.empty(); p = p.parent_path()) {
    std::error_code ec;
    // A path through a file (ENOTDIR) reads as not found: go up to the file.
    const std::filesystem::file_status st = std::filesystem::status(p, ec);
    if (std::filesystem::exists(st)) {
      if (std::filesystem::is_directory(st)) return std::nullopt;
      return p;
    }
    if (p == p.parent_path()) break;  // the root
  }
  return std::nullopt;
}

// Whether the process whose pid a lock file holds has ended. Not when the
// text is no pid (an older lock file), or the process lives as another
// user's (EPERM).
bool HolderHasEnded(const std::string& pid_text) {
  int64_t pid = 0;
  const char* end = pid_text.data() + pid_text.size();
  const auto [ptr, ec] = std::from_chars(pid_text.data(), end, pid);
  if (ec != std::errc() || ptr != end || pid <= 0 || pid > std::numeric_limits<pid_t>::max()) {
    return false;
  }
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// The pid the lock file holds ("?" when it is empty).
std::string HolderPid(int fd) {
  char buffer[32] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "?";
}

Status HeldByAnotherRun(const std::string& pid, const std::string& dir) {
  return FailedPreconditionError("another `pacer run` (pid " + pid + ") is using " + dir +
                                 ": wait for it to end, stop it, or give this run its own "
                                 "--work-dir");
}

// Writes `text` to `path` (in `dir`) aside and renames it over: truncating
// in place, a crash or a full disk left an empty file (the job's deadline
// silently restarted). The file and the rename are synced. False when it
// could not be written (the old file, if any, is then unchanged).
bool WriteAtomically(const std::string& dir, const std::string& path, const std::string& text) {
  const std::string aside = path + ".tmp";
  bool written = false;
  if (const int fd = ::open(aside.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      fd >= 0) {
    written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
              ::fsync(fd) == 0;
    written = ::close(fd) == 0 && written;
  }
  std::error_code ec;
  if (written) std::filesystem::rename(aside, path, ec);
  const bool recorded = written && !ec;
  if (recorded) {
    // The rename is the directory's change: synced too, or a crash can
    // still lose it.
    if (const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir_fd >= 0) {
      (void)::fsync(dir_fd);
      ::close(dir_fd);
    }
  } else {
    std::filesystem::remove(aside, ec);
  }
  return recorded;
}

}  // namespace

StatusOr<WorkDirLock> WorkDirLock::Acquire(const std::string& dir,
                                           const OrphanedWorkersWait& orphans) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // Said here, by its cause: ignored, a file named as the work directory
  // (`--work-dir /etc/passwd`) failed at the lock below as "cannot open
  // /etc/passwd/lock: Not a directory; make /etc/passwd writable (chown)".
  // Whether it is a directory now decides, not `ec`: some libstdc++ versions
  // report an error for a path that ends in '/' and already exists.
  std::error_code is_dir_ec;
  if (!std::filesystem::is_directory(dir, is_dir_ec)) {
    if (const std::optional<std::filesystem::path> file = FileInTheWay(dir)) {
      return InvalidArgumentError(
          "the work directory " + dir + " cannot be made: " + file->string() +
          " is a file, not a directory; give this run a directory with --work-dir (one that "
          "does not exist yet is created)");
    }
    return InvalidArgumentError("cannot create the work directory " + dir + ": " +
                                (ec ? ec.message() : std::string("not a directory")) +
                                "; make its parent writable by this user, or give this run "
                                "another --work-dir");
  }
  const std::string path = dir + "/lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    // EACCES after a `sudo pacer run` left the directory root's: the
    // argument's fault (exit 2), like a directory that cannot be made.
    return InvalidArgumentError("cannot open " + path + ": " + std::strerror(errno) + "; make " +
                                dir +
                                " writable by this user (chown), or give this run its own "
                                "--work-dir");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string pid = HolderPid(fd);
    if (!HolderHasEnded(pid)) {
      ::close(fd);
      return HeldByAnotherRun(pid, dir);
    }
    // The run that wrote its pid is gone, its workers (which inherited the
    // lock) are not: they are saving a checkpoint this run will resume.
    const std::string who = "the workers of an earlier `pacer run` (pid " + pid +
                            ", which has ended) are still using " + dir;
    bool locked = false;
    if (orphans.timeout.count() > 0) {
      if (orphans.on_wait) {
        orphans.on_wait(who +
                        "; they stop at a checkpoint when their `pacer run` is gone: "
                        "waiting up to " +
                        std::to_string(orphans.timeout.count() / 1000) + " s for them to exit");
      }
      const auto give_up = std::chrono::steady_clock::now() + orphans.timeout;
      while (!locked && std::chrono::steady_clock::now() < give_up) {
        ::poll(nullptr, 0, 100);
        locked = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
        // A live run's pid now: the ended one was the last holder's, read
        // in the instant between a new run's lock and its pid's write (or
        // that run started once the workers left). Waiting the whole
        // timeout for it, then naming workers, told the wrong story.
        if (const std::string now_pid = HolderPid(fd);
            !locked && now_pid != pid && now_pid != "?" && !HolderHasEnded(now_pid)) {
          ::close(fd);
          return HeldByAnotherRun(now_pid, dir);
        }
      }
    }
    if (!locked) {
      ::close(fd);
      return FailedPreconditionError(
          who +
          ": wait for them to exit (pgrep -a pacer-worker lists them), or stop them, and "
          "run again; or give this run its own --work-dir");
    }
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The pid is only for the message above; the lock holds without it.
  }
  return WorkDirLock(fd);
}

WorkDirLock::~WorkDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::optional<int64_t> ResumableCheckpointStep(const std::string& checkpoints_dir,
                                               const std::string& job_name) {
  // The workers' own choice (worker/core/resume_point.h), not a second rule:
  // intersecting the steps of every rank-* directory counted the directories
  // a run with more ranks left behind, and after --cpu-devices shrank it
  // said "no checkpoint" (and restarted maxDuration) while the workers
  // resumed. Weights are not asked for: `pacer run` only reports the step,
  // so each file's identity is read, not its gigabytes of weights.
  worker::ResumeRequirements want;
  want.job_name = job_name;
  want.verification = worker::CheckpointVerification::kHeader;
  StatusOr<worker::ResumeChoice> choice = worker::ChooseResumePoint(checkpoints_dir, want);
  if (!choice.ok() || choice->outcome != worker::ResumeChoice::Outcome::kResume) {
    return std::nullopt;
  }
  return choice->step;
}

int64_t FirstStartUnixSeconds(const std::string& dir, int64_t now_unix_seconds,
                              bool* recorded_now) {
  const std::string path = dir + "/started-at";
  std::ifstream in(path);
  int64_t started = 0;
  if (recorded_now != nullptr) *recorded_now = false;
  if (in >> started && started > 0 && started <= now_unix_seconds) return started;
  const bool recorded = WriteAtomically(dir, path, std::to_string(now_unix_seconds) + "\n");
  if (recorded_now != nullptr) *recorded_now = recorded;
  return now_unix_seconds;
}

std::optional<PersistedState::StepUnit> ReadStepUnit(const std::string& dir) {
  std::ifstream in(dir + "/step-unit");
  PersistedState::StepUnit unit;
  if (in >> unit.global_batch_size >> unit.sequence_length && unit.global_batch_size > 0 &&
      unit.sequence_length > 0) {
    return unit;
  }
  return std::nullopt;
}

bool RecordStepUnit(const std::string& dir, const PersistedState::StepUnit& unit) {
  return WriteAtomically(
      dir, dir + "/step-unit",
      std::to_string(unit.global_batch_size) + " " + std::to_string(unit.sequence_length) + "\n");
}

void ForgetStart(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove(dir + "/started-at", ec);
}

StatusOr<std::string> SetAsideFinishedCheckpoints(const std::string& dir) {
  const std::filesystem::path from = std::filesystem::path(dir) / "checkpoints";
  const std::filesystem::path to = std::filesystem::path(dir) / "checkpoints-finished";
  std::error_code ec;
  if (!std::filesystem::exists(from, ec)) return std::string();
  std::filesystem::remove_all(to, ec);
  if (!ec) std::filesystem::rename(from, to, ec);
  if (ec) {
    return FailedPreconditionError("cannot move the finished job's checkpoints from " +
                                   from.string() + " to " + to.string() + ": " + ec.message() +
                                   "; remove " + from.string() +
                                   " before the next run, or it resumes this finished job");
  }
  return to.string();
}

}  // namespace pacer::controller
