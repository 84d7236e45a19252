// The TrainJob reconciler: one level-triggered pass for one job key moves the
// world one step toward the job's spec (controller-runtime's Reconcile). It
// reads the TrainJob, its workers and their metrics, and
//
//   invalid spec            -> phase Failed, condition InvalidSpec, Warning event
//                              (progress, plan and pace kept for the fix)
//   globalBatchSize or      -> the same, reason StepUnitChanged: steps done
//   sequenceLength edited      are counted at the old batch (status.stepUnit)
//   after steps were done
//   spec edited while       -> workers stopped at a checkpoint and relaunched
//   workers run                with the edit (Replanning SpecChanged) when it
//                              changes what they run (WorkerSpecHash)
//   being deleted           -> workers removed, then the finalizer
//   no workers yet          -> plan the remaining steps on the GPUs free now:
//                                fits and meets the deadline -> launch
//                                would meet it with GPUs now busy -> Pending, waits
//                                cannot meet it at all -> Infeasible, with the fix
//                                (a job that already ran gets the fastest plan
//                                and DeadlineAtRisk instead: stopping loses more)
//   launch refused (403,    -> Pending, Planned=False/LaunchRefused with the
//   or 400/422 invalid)        server's message and a Warning event; retried
//                              with per-job backoff (10 s doubling to 5 min)
//   gang incomplete         -> removed and relaunched after
//                              gang_completion_timeout (60 s)
//   gang not scheduled      -> removed and planned again after
//                              gang_scheduling_timeout (300 s)
//   workers running         -> progress and projection from metrics (Degraded
//                              when they cannot be read); the re-plan policy
//                              (core/replan_policy.h) decides Keep or Replan;
//                              Replan stops the workers gracefully (SIGTERM ->
//                              checkpoint) and the next pass launches the new plan
//   a worker failed         -> remove the rest and act on the exit codes
//                              (worker_failure.h): Failed for invalid config
//                              or data loss; otherwise relaunch from the
//                              checkpoint (with more memory margin after an
//                              OOM, without nodes whose collectives keep
//                              failing), up to max_restarts; then Failed
//   all workers succeeded   -> Succeeded (after the total they were launched
//                              with; an edit that added steps relaunches for
//                              the rest; a later edit leaves a Succeeded job
//                              Succeeded unless it adds steps)
//
// With the cluster scheduler (ReconcilerDeps::allocations), a job without
// workers launches only when admitted, on exactly its allocated GPUs; a
// rejected one stays Pending with Admitted=False/Rejected and what would
// admit it; a running one whose allocation changes is stopped at a
// checkpoint and relaunched at the new size (events Growing / Shrinking).
//
// The status is rebuilt from the world on every pass and written through the
// status subresource; what must survive a controller restart (the plan in
// force, the launch attempt, re-plan and restart counts, the measured step
// time ratio) lives in the status itself. Docs: docs/controller.md.
//
// Units: seconds (`_seconds`), Unix seconds (`_unix_seconds`), steps.
// Thread-safety: Reconcile may run concurrently for different keys (the work
// queue never runs one key twice at once); View is safe from any thread.
#ifndef PACER_CONTROLLER_RECONCILE_RECONCILER_H_
#define PACER_CONTROLLER_RECONCILE_RECONCILER_H_

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/replan_policy.h"
#include "core/trainjob_status.h"
#include "reconcile/cluster_scheduler.h"
#include "reconcile/interfaces.h"

namespace pacer::controller {

inline constexpr const char* kFinalizer = "pacer.dev/cleanup";
// Conditions beyond core/trainjob_status.h's.
inline constexpr const char* kConditionInvalidSpec = "InvalidSpec";
inline constexpr const char* kConditionDeadlineExceeded = "DeadlineExceeded";
// The last worker failure and the action taken (reason: worker_failure.h's),
// kept while the relaunched workers run.
inline constexpr const char* kConditionWorkerFailure = "WorkerFailure";

struct ReconcilerOptions {
  int max_restarts = 3;       // worker failures before the job fails
  // The job has run before this reconciler saw it (local mode resuming from
  // a checkpoint, whose status did not outlive the last run): like a job
  // with attempts, it runs on late past its deadline instead of failing
  // as a spec error.
  bool resumes_earlier_run = false;
  bool use_finalizer = true;  // off in local mode (nothing outlives it)
  ReplanOptions replan;       // margin and hysteresis
  // How long a job waiting for GPUs waits before it is planned again (a
  // node or pod change also wakes it).
  std::chrono::milliseconds pending_retry{30000};
  // How often a starting or stopping job is looked at (pod events also wake it).
  std::chrono::milliseconds transition_poll{2000};
  // Workers stopping longer than this (their node down or unreachable keeps
  // a deleted pod Terminating, for ever) are named in a Warning event and a
  // Degraded WorkersStuckTerminating condition with the fix. The wait goes
  // on: two attempts must never write the checkpoint volume.
  std::chrono::seconds stuck_stop_after{600};
  // A launch the API server refuses (403: a ResourceQuota, an admission
  // webhook, a policy) is tried again after this delay, doubling with every
  // refusal in a row up to the max; pod events in between do not retry it
  // (they used to, creating and deleting pod 0 ten times a second), and
  // WakeRefusedLaunches() (a quota changed) retries at once.
  std::chrono::milliseconds launch_refusal_base_delay{10000};
  std::chrono::milliseconds launch_refusal_max_delay{300000};
  // A gang with fewer workers than its plan's nodes (the controller that
  // created it died midway, or a pod was deleted by hand) for this long is
  // removed and launched again: a partial gang holds GPUs and never starts.
  std::chrono::milliseconds gang_completion_timeout{60000};
  // A gang with worker pods no node holds (the GPUs they were planned on
  // were taken meanwhile, or their node went away) for this long is removed
  // and planned again: its bound pods hold GPUs, the gang never starts
  // part-way, and with --scheduling=fifo it holds other launches back.
  // Zero: never (pods wait for the cluster to grow, e.g. an autoscaler).
  std::chrono::milliseconds gang_scheduling_timeout{300000};
};

// What the last pass saw, for the daemon's metrics and the local progress bar.
struct JobView {
  JobRef job;
  Phase phase = Phase::kPending;
  std::optional<planner::Evaluation> plan;
  int attempt = 0;
  int64_t steps_completed = 0;
  int64_t total_steps = 0;
  std::optional<double> measured_step_seconds;
  std::optional<int64_t> projected_completion_unix_seconds;
  std::optional<int64_t> deadline_unix_seconds;
  std::optional<double> slack_seconds;
  int replans = 0;
  int restarts = 0;
  std::vector<Condition> conditions;
  bool deleted = false;
};

struct ReconcileResult {
  Status status;  // non-OK: requeue with backoff unless !status.retryable()
  std::optional<std::chrono::milliseconds> requeue_after;
};

struct ReconcilerDeps {
  JobStore* store = nullptr;
  Launcher* launcher = nullptr;
  MetricsSource* metrics = nullptr;
  InventorySource* inventory = nullptr;
  const Clock* clock = nullptr;
  // The cluster scheduler's allocations (cluster_scheduler.h), or null: then
  // each job is planned alone on the GPUs free now (first come, first
  // served; local mode). With a board, a job launches only once admitted,
  // on exactly its allocation, and is resized when its allocation changes.
  const AllocationBoard* allocations = nullptr;
};

class Reconciler {
 public:
  Reconciler(ReconcilerDeps deps, ReconcilerOptions options);

  ReconcileResult Reconcile(const std::string& key);

  // The last pass's view of `key`; nullopt before the first pass.
  std::optional<JobView> View(const std::string& key) const;

  // The jobs whose last launch was refused, with their refusal backoff
  // cleared so that their next pass launches at once: for the caller to
  // enqueue when what refused them may have changed (a ResourceQuota).
  std::vector<std::string> WakeRefusedLaunches();

 private:
  struct Pass;  // one pass's working state (reconciler.cc)

  ReconcileResult ReconcileDeleted(Pass& pass);
  // A spec the controller refuses (unparsable, or StepUnitChanged): phase
  // Failed (a Succeeded job stays Succeeded), InvalidSpec=True/`reason`
  // (and Failed=True/`reason`), a Warning event on the transition, running
  // workers stopped at a checkpoint. The previous status's progress, plan and
  // measuredStepSeconds are kept, so that the fix relaunches for the steps
  // left.
  ReconcileResult ReconcileInvalidSpec(Pass& pass, const std::string& reason,
                                       const std::string& message);
  // Drops everything kept for job `key` (it is gone). Takes mu_, then fifo_mu_.
  void Forget(const std::string& key);
  ReconcileResult ReconcileWithoutWorkers(Pass& pass);
  // Before an attempt's workers stop for a failure or a resize: the plan's
  // GPU type gets the step-time ratio this attempt measured
  // (status.measuredStepSeconds against the plan's raw prediction), so the
  // next launch plans with it, as a re-plan does.
  void KeepMeasuredPace(Pass& pass);
  // Stops attempt `attempt`'s workers at a checkpoint for a re-plan or a
  // resize whose decision is already in pass.state, remembering both in
  // graceful_stops_.
  Status StopToRelaunch(const Pass& pass, int64_t attempt);
  // Writes a graceful stop's decision into pass.state when the status lost
  // it (graceful_stops_), once `group` (Observe's) shows that stop under way
  // or done.
  void RecallLostStopDecision(Pass& pass, const std::optional<WorkerGroup>& group);
  ReconcileResult ReconcileWithWorkers(Pass& pass, const WorkerGroup& group);
  ReconcileResult LaunchPlan(Pass& pass, const planner::Evaluation& plan);
  // Without the cluster scheduler: why `pass`'s job must not launch now on
  // `planned_gpu_type`, or nullopt. Another job's launch is on its way to
  // GPUs of that type (a launch of this controller's the pod cache does not
  // show yet, or worker pods no node has held for less than
  // gang_scheduling_timeout). Forgets launches the cache shows in full.
  // Requires fifo_mu_.
  std::optional<std::string> OtherLaunchOnItsWay(const Pass& pass,
                                                 const ClusterInventory& inventory,
                                                 const std::string& planned_gpu_type);
  // Pending with Planned=False/LaunchRefused and the server's message, looked
  // at again after `retry_in`.
  ReconcileResult LaunchRefused(Pass& pass, const std::string& message,
                                std::chrono::milliseconds retry_in);
  ReconcileResult ReconcileWaiting(Pass& pass, const std::string& reason,
                                   const std::string& message);
  // Removes the job's workers when some have had no node for
  // gang_scheduling_timeout (a Warning event says so); nullopt otherwise.
  std::optional<ReconcileResult> RemoveUnschedulableGang(Pass& pass, const WorkerGroup& group);
  // A job without workers under the cluster scheduler: launch, wait or stay
  // rejected as its allocation says.
  ReconcileResult ReconcileScheduled(Pass& pass, const ClusterInventory& inventory,
                                     const planner::JobSpec& remaining_job);
  // The Admitted condition from the job's allocation (events on transitions).
  void NoteAdmission(Pass& pass);
  // Failed workers: the action worker_failure.h decides, recorded as an
  // event and a condition.
  ReconcileResult ReconcileFailedWorkers(Pass& pass, const WorkerGroup& group);
  // Whether some of the job's workers ended since this pass observed them.
  bool WorkersJustEnded(const JobRef& job);
  // Whether the job has run before (an attempt, or an earlier run this
  // reconciler resumes): it then runs on late rather than fail.
  bool HasRun(const Pass& pass) const;
  // A job that has run, launched past what its deadline allows:
  // DeadlineAtRisk=True DeadlineUnreachable with `message` (an event on the
  // transition).
  void MarkRunningLate(Pass& pass, const std::string& message);
  ReconcileResult Finish(Pass& pass, std::optional<std::chrono::milliseconds> requeue_after);
  // A stopping `group` with workers left: past stuck_stop_after, says which
  // and what to do (a Warning event once per attempt, Degraded while so).
  void NoteStuckStop(Pass& pass, const WorkerGroup& group);
  // What a failed status write returns. The API server refusing the status
  // (400, 413, 422: InvalidArgument) is not the spec's fault, but
  // InvalidArgument is terminal to the work queue: the job left the queue
  // and lost its re-plan requeue and launch retries. A refusal becomes a
  // retry with backoff and a StatusWriteRefused event; other failures
  // (conflict, unavailable) are returned as they are.
  Status StatusWriteFailure(const Pass& pass, const Status& written);

  ReconcilerDeps deps_;
  ReconcilerOptions options_;
  // A job's launch refusals in a row (guarded by mu_).
  struct Refusals {
    int count = 0;
    Clock::SteadyTime retry_at;
    std::string message;  // the server's, e.g. `exceeded quota: gpus, requested: ...`
    int64_t attempt = 0;  // the refused launch's, whose created pods the launcher removed
    // The spec generation refused: an edit (the documented fix of a 400 or
    // 422) is asked about at once, not after the backoff.
    std::optional<int64_t> generation;
  };

  mutable std::mutex mu_;
  std::map<std::string, JobView> views_;
  std::map<std::string, Refusals> refusals_;
  // When a job's gang was first seen incomplete, and with pods no node
  // holds (guarded by mu_).
  std::map<std::string, Clock::SteadyTime> partial_since_;
  std::map<std::string, Clock::SteadyTime> unscheduled_since_;
  // Each job's last re-plan or resize that stopped its workers gracefully
  // (guarded by mu_): an expectation, as controllers keep for their own
  // deletions. The status write after the stop says so too, but when it
  // fails (a conflict) the next pass sees stopping pods, a Running status
  // and no Replanning condition, which is what a node drain looks like, and
  // what the decision wrote (replans, lastReplanTime, calibration,
  // nextPlan) would be lost: the passes that wait for the pods write it
  // again from here.
  struct GracefulStop {
    int64_t attempt = 0;
    int replans = 0;
    std::optional<int64_t> last_replan_unix_seconds;
    planner::Calibration calibration;
    std::optional<planner::Layout> next_layout;
    // Stop answered an error: perhaps nothing was deleted. Dropped by the
    // next pass that sees the attempt's workers still running unstopped.
    bool stop_failed = false;
  };
  std::map<std::string, GracefulStop> graceful_stops_;
  // Since when each job's attempt has been seen stopping with workers left
  // (guarded by mu_), and whether that was reported.
  struct StoppingSince {
    int64_t attempt = 0;
    Clock::SteadyTime since;
    bool reported = false;
  };
  std::map<std::string, StoppingSince> stopping_since_;

  // Without the cluster scheduler (--scheduling=fifo) every job is planned
  // alone against the GPUs free when it is reconciled. Pods the API server
  // has but no node holds yet take no free GPUs in the inventory, so two
  // jobs reconciled one after the other (or on two workers at once) were
  // both planned onto the same free GPUs: neither gang could then start
  // whole. A fifo pass holds fifo_mu_ from reading the inventory to
  // recording its launch, and launches only while no other launch is on its
  // way (OtherLaunchOnItsWay). Launches recorded here cover the time until
  // the pod cache shows their pods (guarded by fifo_mu_).
  struct LaunchOnItsWay {
    std::string gpu_type;
    int gpus = 0;
    Clock::SteadyTime launched_at;
  };
  std::mutex fifo_mu_;
  std::map<std::string, LaunchOnItsWay> fifo_launches_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_RECONCILE_RECONCILER_H_
