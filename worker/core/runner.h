// The per-rank training loop of pacer-worker: rendezvous, resume, steps,
// checkpoints, metrics and a clean stop. One call runs one rank to its end
// and returns the process exit code (exit_codes.h).
//
//   1. Global rank 0 hosts the TcpStoreServer at MASTER_ADDR:MASTER_PORT;
//      every rank connects to it (a peer that never shows up ends the wait
//      with kExitRendezvousTimeout).
//   2. The ranks agree on the step to resume from: rank 0 tries the
//      checkpoints newest first (ChooseResumePoint, resume_point.h) and
//      publishes the newest step every rank of the previous run has a usable
//      checkpoint of (written by one run: files of a rolled-back run and of
//      the run after it do not mix), with this run's new id, which every
//      rank writes into its checkpoints. Falling back past an unreadable newest checkpoint is
//      logged ("checkpoint at step M unreadable (...); resuming from step N,
//      K steps lost") and exported as pacer_worker_resume_steps_lost; when
//      checkpoints exist but none is usable every rank exits with
//      kExitDataLoss instead of starting over. With --checkpoint-buffers a
//      checkpoint is usable only if the same plan wrote it and it holds
//      weights (they are restored); without, only the step counter carries
//      over, so any plan's checkpoint will do (a re-plan starts from freshly
//      initialised shards). With --checkpoint-buffers a rank whose weights
//      and optimizer state exceed a checkpoint's 64 GiB exits invalid-config
//      before its first step.
//   3. Steps run until the plan's total. Every checkpoint_interval_steps and
//      on a stop request, each rank writes its checkpoint atomically.
//   4. SIGTERM / SIGINT: ranks read the stop claim from the store at every
//      step until the second step of the process, then only every N steps,
//      N = about 2 s of rank 0's measured step time, at most 100 steps
//      (StopCheckIntervalSteps; published once through the store), so the
//      store is not on every step's path. The rank that
//      sees the signal first claims, at its next check (step s), a stop at
//      the check after (no rank reaches it before finishing step s, which
//      needs this rank's collectives, so no rank reads past the claim),
//      publishes it in the store, and every rank stops there after
//      checkpointing (without a checkpoint directory: stops there, saves
//      nothing and says so, checkpoint=none).
//   5. A stop before the first step (points 1 and 2: the store connect,
//      the backend's rendezvous, the resume point) ends the wait it comes
//      in (the store client's interrupt, tcp_store.h) and the rank returns
//      kExitStoppedAfterCheckpoint at once: this run trained nothing, so
//      there is nothing to save. So does a first step that fails because
//      the peers are leaving on the same stop. Without that, a rank waiting
//      for peers that never come read its stop only in the step loop, up to
//      PACER_TIMEOUT_SECONDS later, long after the supervisor's SIGKILL.
//
// Thread-safety: RunRank owns everything it creates; call it once per rank
// (in its own process, see supervisor.h).
#ifndef PACER_WORKER_CORE_RUNNER_H_
#define PACER_WORKER_CORE_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/step_backend.h"
#include "core/worker_config.h"
#include "pacer/status.h"

namespace pacer::worker {

using BackendFactory = std::function<std::unique_ptr<StepBackend>()>;

struct RunOptions {
  uint64_t seed = 1234;
  bool checkpoint_buffers = false;  // store weights and optimizer state too
  // Catalog and calibrated peak FLOP/s per GPU (or CPU rank) for MFU; 0 = unknown.
  double catalog_peak_flops = 0;
  double calibrated_peak_flops = 0;
};

// Runs global rank config.GlobalRank(local_rank) to completion and returns
// its exit code. Logs key=value lines to stderr naming job and rank.
int RunRank(const WorkerConfig& config, int local_rank, const BackendFactory& make_backend,
            const RunOptions& options);

// The exit code for a failed Status (step_backend.h's mapping).
int ExitCodeFor(const Status& status);

// A short, stable description of the plan, stored in checkpoints: buffers
// are restored only into the same plan.
std::string PlanFingerprint(const WorkerConfig& config);
// The fingerprints a checkpoint restored into this plan may carry: this
// plan's, and the shorter one workers wrote before the attention and MLP
// shape were part of it (their checkpoints stay usable across an upgrade;
// those fields of theirs cannot be checked).
std::vector<std::string> AcceptedPlanFingerprints(const WorkerConfig& config);
// What every rank of a run must agree on, as space-separated tokens: the
// plan (PlanFingerprint), the world (W world size, N nodes, l ranks per
// node), the batch (B), the steps (S), the optimizer, the attention kernel,
// the scale and the job. Compared with rank 0's before the backend starts.
std::string WorldFingerprint(const WorkerConfig& config);
// The store key rank 0 publishes it under.
inline constexpr char kWorldPlanKey[] = "runner/world-plan";
// OK when `mine` (this rank's WorldFingerprint) is rank 0's `theirs`; else
// InvalidArgument naming the tokens that differ (nodes started with other
// settings: a collective of other sizes aborted inside Gloo, or another
// accumulation trained on silently wrong).
Status CompareWithRankZero(const std::string& mine, const std::string& theirs);

// Steps between reads of the stop claim (point 4 above) after rank 0's
// step took `rank0_step_seconds`: about kStopCheckSeconds of steps, at least
// 1 and at most kMaxStopCheckSteps. The cap is for short steps, whose time
// is the noisiest under contention: a 3 ms sample would otherwise mean a
// check every ~700 steps, and a 12-fold slowdown later would outlast a 25 s
// termination grace period. 100 steps keep the store off the step path (one
// round trip per 100 steps).
inline constexpr double kStopCheckSeconds = 2.0;
inline constexpr int64_t kMaxStopCheckSteps = 100;
int64_t StopCheckIntervalSteps(double rank0_step_seconds);

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_RUNNER_H_
