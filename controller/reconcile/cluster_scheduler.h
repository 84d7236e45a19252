// The controller's scheduler pass: one decision over every TrainJob of the
// cluster at once (not per job), with the deadline policy of
// pacer/sched/scheduler.h, the same code `pacer simulate` replays traces
// through. It decides which jobs are admitted (every admitted job still
// meets its deadline with the newcomer), and how many GPUs of which type
// each job holds now; the reconciler then launches, waits, or resizes each
// job to its Allocation (reconciler.h).
//
//   job's curve T(g)  the planner's fastest layout with exactly g GPUs
//                     (planner::Sweep, TP/PP/ZeRO/micro-batch all chosen),
//                     for g = 1, 2, 4 .. GPUs per node, then whole nodes;
//                     scaled by the job's measured / predicted step time
//                     once it has run (status.measuredStepSeconds)
//                     planned with the job's memory margin (raised after
//                     out-of-memory exits, status.memoryMarginFraction) on
//                     the nodes it may use (status.excludedNodes left out)
//   pools             one per GPU type: its free GPUs plus the GPUs that
//                     scheduled jobs' pods hold now (ClusterInventory::
//                     trainjob_gpus: the pods, not the status, which lags
//                     them both ways). A job runs on one type: the
//                     one it runs on, else the pool an admitted job waits
//                     in while a layout there runs it, else the allowed
//                     type with most GPUs on the nodes it may use among
//                     those some layout runs it on. An admitted job that
//                     moves pools enters the new one through its admission
//                     test, and waits admitted in its old one until that
//                     admits it. A job's curve ends at the GPUs
//                     of those nodes, so its excluded nodes' GPUs are never
//                     its share (the pool's capacity is shared by all jobs:
//                     others may still be planned onto them)
//   restart cost      the planner's startup time per relaunch; the policy
//                     resizes only when the time saved pays for it twice
//   admitted          kept in status (condition Admitted=True): an admitted
//                     job is never dropped, also across controller restarts
//
// Docs: docs/scheduling.md ("In the controller") and docs/controller.md.
// Units: Unix seconds (`_unix_seconds`), steps, GPUs.
// Thread-safety: ClusterScheduler::Pass from one thread at a time (the
// manager's scheduler loop); AllocationBoard is safe from any thread.
#ifndef PACER_CONTROLLER_RECONCILE_CLUSTER_SCHEDULER_H_
#define PACER_CONTROLLER_RECONCILE_CLUSTER_SCHEDULER_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/node_inventory.h"
#include "pacer/planner/calibration.h"
#include "pacer/planner/cost_model.h"
#include "pacer/planner/inventory.h"
#include "pacer/planner/job_spec.h"
#include "pacer/sched/scheduler.h"
#include "pacer/status.h"

namespace pacer::controller {

// Condition type for the scheduler's verdict: True/Admitted, or
// False/Rejected with what would admit the job.
inline constexpr const char* kConditionAdmitted = "Admitted";

// One job's share of the cluster under the shared plan.
struct Allocation {
  bool admitted = false;
  int gpus = 0;          // to hold now (0: waiting for its reserved GPUs, or rejected)
  std::string gpu_type;  // catalog name of the pool it is scheduled on
  // Rejected: why, and what would admit it (a later deadline, fewer steps,
  // more GPUs of a type), in words.
  std::string message;
  // When it finishes under the shared plan (deadline jobs).
  std::optional<int64_t> planned_finish_unix_seconds;
  // When its reserved GPUs start, for an admitted job given none yet.
  std::optional<int64_t> next_start_unix_seconds;

  // Whether a job would act differently (launch, wait, resize, stay
  // rejected): the planned finish alone moves every pass and is not a
  // reason to reconcile.
  bool SameDecision(const Allocation& other) const;
};

// The latest pass's allocations, read by the reconcile workers.
class AllocationBoard {
 public:
  // nullopt: the scheduler has not seen the job yet.
  std::optional<Allocation> Get(const std::string& key) const;
  // Replaces every allocation; returns the keys whose decision changed,
  // appeared or disappeared (the jobs to reconcile now).
  std::vector<std::string> Publish(std::map<std::string, Allocation> allocations);
  // Copies of all allocations, for metrics.
  std::map<std::string, Allocation> All() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, Allocation> allocations_;
};

struct ClusterSchedulerOptions {
  // Passes run at least this far apart (besides those an event triggers):
  // reservations that start are given out by the next pass.
  double decision_interval_seconds = 60;
  // A running job grows only if it finishes this many relaunches sooner.
  double hysteresis_factor = 2.0;
  // Plans stretch each job's remaining work by this share, so that a
  // reservation made as late as possible survives step times a few percent
  // slower than the curve, rounding, and a relaunch that takes longer than
  // the planner's startup time (spec.replan.slack's default, 5%).
  double plan_headroom_fraction = 0.05;
  // Jobs are planned to finish this long before their deadline: a
  // reservation made as late as possible ends at the planned deadline, and
  // the pass that starts it runs a little after the planned instant (a
  // second's debounce, whole seconds, a busy API server).
  double deadline_guard_seconds = 60;
  planner::ModelConstants constants;  // startup_seconds is the relaunch cost
};

// A TrainJob as the scheduler sees it (ClusterScheduler::JobFromObject).
struct ScheduledJob {
  std::string key;  // namespace/name
  std::string uid;
  int64_t generation = 0;
  int64_t arrival_unix_seconds = 0;  // metadata.creationTimestamp
  // spec.memory_margin_fraction: status.memoryMarginFraction (out-of-memory
  // exits raise it), as the reconciler plans with.
  planner::JobSpec spec;
  // status.excludedNodes: nodes where its collectives kept failing; their
  // GPUs are not capacity for this job.
  std::vector<std::string> excluded_nodes;
  int64_t remaining_steps = 0;
  // Condition Degraded/MetricsUnavailable: its progress is not seen. It is
  // never grown then (Pass ends its curve at what it holds): a job grown on
  // progress nobody has seen relaunched for nothing, or for a slowdown
  // nobody measured. Others' deadlines may still shrink it.
  bool progress_unseen = false;
  // Unseen and past the projection the reconciler holds, its workers still
  // running: how far it is, nothing says. A deadline job is taken to hold
  // its GPUs until its deadline (Pass): counted as one step left, others
  // were admitted onto GPUs it still held, and their reservations slid a
  // pass later at every pass, past their deadlines.
  bool past_held_projection = false;
  std::optional<int64_t> deadline_unix_seconds;
  // status.plan while it has workers: its type and its admission. What it
  // holds now, Pass reads from its pods (ClusterInventory::trainjob_gpus).
  int current_gpus = 0;
  std::string current_gpu_type;  // catalog name, when current_gpus > 0
  // status.schedule: the share a scheduler pass last gave it (a previous
  // leader's, after a failover), when it gave GPUs of a catalog type.
  int allocated_gpus = 0;
  std::string allocated_gpu_type;    // its pool's catalog name, as written
  bool admitted = false;             // condition Admitted=True
  double step_time_ratio = 1.0;      // measured / predicted step time
  planner::Calibration calibration;  // status.calibration, as the reconciler plans with
};

class ClusterScheduler {
 public:
  explicit ClusterScheduler(ClusterSchedulerOptions options);

  // The job to schedule, or nullopt for one that takes no part: finished
  // (Succeeded, Failed, Infeasible), being deleted, or with a spec the
  // planner cannot read (the reconciler reports those).
  static std::optional<ScheduledJob> JobFromObject(const nlohmann::json& trainjob,
                                                   int64_t now_unix_seconds);

  // One pass over every job. `cluster`'s free GPUs exclude the GPUs the
  // jobs hold now (any pod's GPUs are not free), its trainjob_gpus say which
  // of them each job's pods hold, and its nodes by pool which GPUs each
  // job's excluded nodes take away.
  StatusOr<std::map<std::string, Allocation>> Pass(const std::vector<ScheduledJob>& jobs,
                                                   const ClusterInventory& cluster,
                                                   int64_t now_unix_seconds);

  // T(g) of `job` on the `gpu_type` pools of `cluster` (all idle) without
  // the job's excluded nodes, with the job's memory margin.
  StatusOr<sched::ThroughputCurve> Curve(const ScheduledJob& job, const ClusterInventory& cluster,
                                         const std::string& gpu_type, int64_t now_unix_seconds);

  // When the next pass is due even if nothing changes (a reservation
  // starts), from the last Pass.
  std::optional<int64_t> next_wakeup_unix_seconds() const { return next_wakeup_; }

 private:
  struct CachedCurve {
    std::string signature;  // what the curve was computed from
    // A failure too: a job no layout of a type runs was swept again, for
    // nothing, at every pass (twice, when the pass also chose its type).
    StatusOr<sched::ThroughputCurve> curve;
  };

  // The fastest plan's throughput at each candidate count of `gpu_type`
  // on `idle` (every GPU free): Curve's work, uncached.
  StatusOr<sched::ThroughputCurve> SweepCurve(const ScheduledJob& job,
                                              const planner::Inventory& idle,
                                              const std::string& gpu_type,
                                              int64_t now_unix_seconds) const;

  // The share of `gpu_type` GPUs the last pass gave `job` (this
  // scheduler's, else its status's), held while its pods are between two
  // attempts.
  int RememberedShare(const ScheduledJob& job, const std::string& gpu_type) const;

  ClusterSchedulerOptions options_;
  // By job key, then GPU type: a job whose pool is chosen by trying
  // another type first keeps both, instead of sweeping both at every pass.
  std::map<std::string, std::map<std::string, CachedCurve>> curves_;
  std::map<std::string, std::pair<std::string, int>> shares_;         // by job key: type, GPUs
  std::map<std::string, std::vector<sched::ReservedSpan>> reserved_;  // by job key
  // By job key: the GPU types whose pools rejected the job, while it holds
  // nothing and is not admitted. The next pass tests it in another allowed
  // pool (the largest not tried yet); once every one has rejected it, the
  // round starts again.
  std::map<std::string, std::set<std::string>> rejected_in_;
  // The uids of the jobs the last pass admitted: a job's Admitted condition
  // reaches the informer's cache a reconcile later, and until then Pass
  // takes it for admitted from here.
  std::set<std::string> admitted_uids_;
  std::optional<int64_t> next_wakeup_;
};

// A finished job's deadline outcome: true when it succeeded no later than
// status.deadline, false when it finished late, failed or was infeasible;
// nullopt while it runs or when it has no deadline.
std::optional<bool> DeadlineMet(const nlohmann::json& trainjob);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_RECONCILE_CLUSTER_SCHEDULER_H_
