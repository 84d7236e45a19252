// Local mode's work directory (.pacer/<namespace>/<name>): one `pacer run` at
// a time (an flock on <dir>/lock, released when the process ends, however it
// ends), the step the checkpoints can resume from, and when the job first
// started, so that maxDuration keeps counting across Ctrl-C and resume.
//
// Units: Unix seconds, optimizer steps. Thread-safety: none needed (one
// `pacer run` per process); the lock is between processes.
#ifndef PACER_CONTROLLER_LOCAL_WORK_DIR_H_
#define PACER_CONTROLLER_LOCAL_WORK_DIR_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "pacer/status.h"
#include "reconcile/job_object.h"

namespace pacer::controller {

// When the lock is held by the workers of a `pacer run` that has ended
// (killed, so it could not wait for them): they stop at a checkpoint once
// they see it gone, and Acquire waits up to `timeout` for them, after
// calling `on_wait` once with what it waits for. Zero: it does not wait.
struct OrphanedWorkersWait {
  std::chrono::milliseconds timeout{0};
  std::function<void(const std::string& message)> on_wait;
};

// Holds <dir>/lock exclusively while it lives (creates <dir>). The lock is
// an flock on the open file: every process that inherits fd() (the
// workers, ProcessLauncherOptions::inherited_fds) holds it with this one,
// so a `pacer run` killed with SIGKILL leaves the directory locked until
// its workers have exited, and a new run cannot start beside them.
class WorkDirLock {
 public:
  // InvalidArgument when `dir` is not a directory and cannot be made one (a
  // file in its place or in its path; the message names it), cannot be
  // created, or its lock file cannot be opened (`pacer run` exits 2: the
  // argument's fault); FailedPrecondition naming the other process when it
  // holds the lock, or the ended `pacer run` whose workers still do
  // (after `orphans.timeout`).
  static StatusOr<WorkDirLock> Acquire(const std::string& dir,
                                       const OrphanedWorkersWait& orphans = {});
  int fd() const { return fd_; }
  WorkDirLock(WorkDirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  WorkDirLock& operator=(WorkDirLock&&) = delete;
  WorkDirLock(const WorkDirLock&) = delete;
  ~WorkDirLock();

 private:
  explicit WorkDirLock(int fd) : fd_(fd) {}
  int fd_;
};

// The step the workers of job `job_name` (metadata.name) resume from: the
// newest checkpoint (<checkpoints_dir>/rank-<R>/step-<N>.ckpt, docs/worker.md)
// that every rank of the world that wrote it holds intact, chosen by the
// workers' own rule (worker/core/resume_point.h); nullopt when there is none
// (or none usable, or the directory cannot be read). Reads each file's
// identity and checks its header and size (CheckpointStore::LoadIdentity),
// not its payload CRC: a checkpoint torn inside its weights is named here
// and skipped by the workers, who check it in full.
std::optional<int64_t> ResumableCheckpointStep(const std::string& checkpoints_dir,
                                               const std::string& job_name);

// When the job in `dir` first started: read from <dir>/started-at, or
// `now_unix_seconds`, written there (atomically: a crash leaves the old
// file or the new one), when absent; *recorded_now says which. ForgetStart
// removes it (the job ended, or the run launched nothing: the next run
// starts afresh).
int64_t FirstStartUnixSeconds(const std::string& dir, int64_t now_unix_seconds,
                              bool* recorded_now = nullptr);
void ForgetStart(const std::string& dir);

// The unit the checkpoints' steps count in (a step is one global batch of
// sequences of this length), kept in <dir>/step-unit by the run that wrote
// them: a run resuming them with another batch or sequence length counted
// the steps at the new value (46 steps of 16 sequences resumed as 46 of 32,
// and 736 sequences were never trained). ReadStepUnit: nullopt when absent
// or unreadable (an older pacer run); RecordStepUnit: false when it could
// not be written.
std::optional<PersistedState::StepUnit> ReadStepUnit(const std::string& dir);
bool RecordStepUnit(const std::string& dir, const PersistedState::StepUnit& unit);

// A job that succeeded is done: its checkpoints (<dir>/checkpoints) are
// moved to <dir>/checkpoints-finished, replacing an older finished job's,
// so that the next run of the file trains it from step 0 instead of
// resuming the last periodic checkpoint and training its final steps
// again. Returns the new path, or "" when there was nothing to move;
// an error names the path and what to do.
StatusOr<std::string> SetAsideFinishedCheckpoints(const std::string& dir);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_LOCAL_WORK_DIR_H_
