// ChooseResumePoint: the step a restarted job resumes from, chosen so that a
// bad checkpoint costs the steps since the previous good one, never the whole
// run.
//
// Candidates are rank 0's checkpoint files, newest first (every plan has a
// rank 0, and its files record the world size that wrote them). A candidate
// step is usable when every rank of that world has a file for it that passes
// the full CRC check, names this job, agrees on the world size, was written
// by the same run as rank 0's (a run rolled back to an older step leaves
// newer files behind; the next run may rewrite such a step on only some
// ranks before it ends, and the two halves are not one checkpoint), and, when
// model buffers are restored (`needs_same_plan`), was written by the current
// plan and holds buffers: restoring another layout's weights is impossible,
// and starting fresh weights at step N would silently throw the training
// away. The newest usable
// step wins; each newer step that was skipped is reported with why.
//
// Outcomes: kFresh when the directory holds no checkpoint at all (a first
// run); kResume with the step and the steps lost by falling back; kNoUsable
// when checkpoints exist but none is usable: the caller must not start fresh
// (pacer-worker exits with kExitDataLoss).
//
// Units: steps are global optimizer steps completed. Errors (Status) only for
// I/O that says nothing about the checkpoints themselves: a directory that
// exists but cannot be listed (kUnavailable, retry may help), or whose path
// is misconfigured (kInvalidArgument: a regular file on it, no permission).
//
// Thread-safety: a pure function of the files; safe to call concurrently.
#ifndef PACER_WORKER_CORE_RESUME_POINT_H_
#define PACER_WORKER_CORE_RESUME_POINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "pacer/status.h"

namespace pacer::worker {

struct ResumeRequirements {
  std::string job_name;          // checkpoints of another job are never used
  // PlanFingerprints a usable checkpoint may carry (AcceptedPlanFingerprints
  // of the current plan; the first is the current one).
  std::vector<std::string> plan_fingerprints;
  bool needs_same_plan = false;  // true when model buffers will be restored
  // kHeader: each file's identity only (CheckpointStore::LoadIdentity), for
  // a caller that reports the step (`pacer run`); the workers, which
  // restore from it, use kFull. needs_same_plan always reads in full (it
  // checks that the file holds weights).
  CheckpointVerification verification = CheckpointVerification::kFull;
};

struct ResumeChoice {
  enum class Outcome { kFresh, kResume, kNoUsable };
  Outcome outcome = Outcome::kFresh;
  int64_t step = 0;         // resume here (kResume); 0 otherwise
  int64_t newest_step = 0;  // the newest checkpoint step found, usable or not
  // "step M: why" for each step newer than `step` that was skipped (all of
  // them for kNoUsable), newest first.
  std::vector<std::string> rejected;

  // Steps of training thrown away by the fallback (0 when the newest was used).
  int64_t steps_lost() const { return outcome == Outcome::kResume ? newest_step - step : 0; }
};

// Chooses the resume point among the checkpoints under `dir` (the job's
// PACER_CHECKPOINT_DIR, a volume every rank's directory is visible on).
StatusOr<ResumeChoice> ChooseResumePoint(const std::string& dir, const ResumeRequirements& want);

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_RESUME_POINT_H_
