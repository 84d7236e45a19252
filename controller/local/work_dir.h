// Local mode's work directory (.pacer/<namespace>/<name>): one `pacer run` at
// a time (an flock on <dir>/lock, released when the process ends, however it
// ends), the step the checkpoints can resume from, and when the job first
// started, so that maxDuration keeps counting across Ctrl-C and resume.
//
// Units: Unix seconds, optimizer steps. Thread-safety: none needed (one
// `pacer run` per process); the lock is between processes.
#ifndef PACER_CONTROLLER_LOCAL_WORK_DIR_H_
#define PACER_CONTROLLER_LOCAL_WORK_DIR_H_

#include <cstdint>
#include <optional>
#include <string>

#include "pacer/status.h"

namespace pacer::controller {

// Holds <dir>/lock exclusively while it lives (creates <dir>).
class WorkDirLock {
 public:
  // InvalidArgument when `dir` is not a directory and cannot be made one (a
  // file in its place or in its path; the message names it), cannot be
  // created, or its lock file cannot be opened (`pacer run` exits 2: the
  // argument's fault); FailedPrecondition naming the other process when it
  // holds the lock.
  static StatusOr<WorkDirLock> Acquire(const std::string& dir);
  WorkDirLock(WorkDirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  WorkDirLock& operator=(WorkDirLock&&) = delete;
  WorkDirLock(const WorkDirLock&) = delete;
  ~WorkDirLock();

 private:
  explicit WorkDirLock(int fd) : fd_(fd) {}
  int fd_;
};

// The newest step every rank has a checkpoint for
// (<checkpoints_dir>/rank-<R>/step-<N>.ckpt, docs/worker.md), the step the
// workers resume from; nullopt when there is none.
std::optional<int64_t> ResumableCheckpointStep(const std::string& checkpoints_dir);

// When the job in `dir` first started: read from <dir>/started-at, or
// `now_unix_seconds`, written there (atomically: a crash leaves the old
// file or the new one), when absent; *recorded_now says which. ForgetStart
// removes it (the job ended, or the run launched nothing: the next run
// starts afresh).
int64_t FirstStartUnixSeconds(const std::string& dir, int64_t now_unix_seconds,
                              bool* recorded_now = nullptr);
void ForgetStart(const std::string& dir);

// A job that succeeded is done: its checkpoints (<dir>/checkpoints) are
// moved to <dir>/checkpoints-finished, replacing an older finished job's,
// so that the next run of the file trains it from step 0 instead of
// resuming the last periodic checkpoint and training its final steps
// again. Returns the new path, or "" when there was nothing to move;
// an error names the path and what to do.
StatusOr<std::string> SetAsideFinishedCheckpoints(const std::string& dir);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_LOCAL_WORK_DIR_H_
