// The reconciler's view of the outside world, as four small interfaces, so
// one reconciler drives both a Kubernetes cluster (worker Pods, TrainJobs in
// the API server, Prometheus) and local mode (worker processes, a job read
// from a file, metrics scraped directly):
//
//   JobStore         where TrainJobs live and their status is written
//   Launcher         starts, observes and stops a job's workers
//   MetricsSource    measured step time and progress of a running job
//   InventorySource  the GPUs of the cluster (or this machine) now
//
// Units: seconds in `_seconds` names, steps are optimizer steps.
// Thread-safety: implementations must be safe to call from several reconcile
// workers at once, for different keys (the work queue never hands one key to
// two workers).
#ifndef PACER_CONTROLLER_RECONCILE_INTERFACES_H_
#define PACER_CONTROLLER_RECONCILE_INTERFACES_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/node_inventory.h"
#include "pacer/planner/cost_model.h"
#include "pacer/planner/job_spec.h"
#include "pacer/status.h"

namespace pacer::controller {

// Which TrainJob. `key` is "namespace/name", the work queue's item.
struct JobRef {
  std::string namespace_name;
  std::string name;
  std::string uid;  // owner references need it; empty in tests that do not
  // The launch attempt whose workers a measurement is of (MetricsSource);
  // absent: any.
  std::optional<int64_t> attempt;
  // Seconds a step of that attempt is expected to take: the plan's
  // prediction (MetricsSource: a rate window must be longer than a step to
  // see one); absent: unknown.
  std::optional<double> expected_step_seconds;
  std::string key() const { return namespace_name + "/" + name; }
};

class JobStore {
 public:
  virtual ~JobStore() = default;
  // The TrainJob object for "namespace/name"; NotFound once deleted.
  virtual StatusOr<nlohmann::json> Get(const std::string& key) = 0;
  // Writes `status` through the status subresource, guarded by the object's
  // metadata.resourceVersion (Aborted on a conflict: re-read and retry).
  virtual Status WriteStatus(const nlohmann::json& job, const nlohmann::json& status) = 0;
  // Adds or removes `finalizer` in metadata.finalizers; returns the object
  // as stored afterwards.
  virtual StatusOr<nlohmann::json> SetFinalizer(const nlohmann::json& job,
                                                const std::string& finalizer, bool present) = 0;
  // An event on the job ("Normal" or "Warning", a CamelCase reason, a
  // message). Best effort: never fails the reconcile.
  virtual void RecordEvent(const nlohmann::json& job, const std::string& type,
                           const std::string& reason, const std::string& message) = 0;
};

// What one launch runs: the job, the plan, and the attempt number that tells
// this launch's workers from an earlier one's.
struct LaunchSpec {
  JobRef job;
  planner::JobSpec spec;
  planner::Evaluation plan;
  int attempt = 1;
  int64_t total_steps = 0;  // of the whole job; workers resume from checkpoints
  int64_t checkpoint_interval_steps = 0;
  // When the plan was made (Unix s): its predictedCompletionTime counts from
  // here, in status.plan and in the pods' pacer.dev/layout annotation alike.
  int64_t plan_unix_seconds = 0;
  // Nodes the workers must not run on (status.excludedNodes: repeated
  // communication failures there); a launcher that places workers on named
  // nodes keeps them off these.
  std::vector<std::string> excluded_nodes;
  // WorkerSpecHash(spec): what the workers were launched with, so a later
  // spec edit is seen to not have reached them.
  std::string spec_hash;
};

enum class WorkerPhase { kPending, kRunning, kSucceeded, kFailed };
const char* WorkerPhaseName(WorkerPhase phase);

struct WorkerState {
  int node_rank = 0;
  WorkerPhase phase = WorkerPhase::kPending;
  std::optional<int> exit_code;  // pacer-worker's exit code, when it ended
  std::string message;           // why it failed, for events
  std::string node_name;         // the node it ran on; "" when unknown or not scheduled
};

// The workers of a job as they are now.
struct WorkerGroup {
  int attempt = 0;
  int expected_workers = 0;  // nodes of the plan
  std::vector<WorkerState> workers;
  bool stopping = false;  // a graceful stop was requested
  // The layout the workers run, when the launcher recorded it (pods carry it
  // as an annotation): lets a restarted controller adopt workers whose plan
  // never reached the status.
  std::optional<planner::Layout> layout;
  // What the attempt was launched with, when the launcher recorded it (pods:
  // annotations pacer.dev/spec-hash and pacer.dev/total-steps). Empty or
  // nullopt for workers of an older controller: the reconciler then takes
  // them as running the current spec.
  std::string spec_hash;
  std::optional<int64_t> total_steps;
  // When its plan was made (Unix s; pods: pacer.dev/launch-time): the
  // launchTime of an attempt adopted after its status write was lost.
  std::optional<int64_t> launch_unix_seconds;
  int Count(WorkerPhase phase) const;
};

enum class StopMode {
  kGraceful,  // SIGTERM: workers checkpoint and exit (code 6); kept until Remove
  kRemove,    // delete every worker and the group's other objects
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  // Creates what is missing of `spec`'s workers. Idempotent. PermissionDenied
  // (a quota or policy), InvalidArgument (objects the server finds invalid)
  // and FailedPrecondition (another object is in the way) are refusals the
  // reconciler shows as LaunchRefused and retries with backoff.
  virtual Status Launch(const LaunchSpec& spec) = 0;
  // The job's workers, or nullopt when it has none.
  virtual StatusOr<std::optional<WorkerGroup>> Observe(const JobRef& job) = 0;
  virtual Status Stop(const JobRef& job, StopMode mode) = 0;
  // Workers of the job that were deleted and are not gone yet: a real API
  // server keeps a deleted pod Terminating for its grace period, holding its
  // GPUs and the checkpoint volume. The next attempt is planned only once
  // this is 0. Launchers whose workers end at once need not override it.
  virtual int TerminatingWorkers(const JobRef& job) {
    (void)job;
    return 0;
  }
};

struct Measurement {
  std::optional<double> step_seconds;      // mean over the recent window (or run)
  std::optional<int64_t> steps_completed;  // the furthest any rank got
  std::optional<double> model_scale;       // < 1: a shrunk CPU run, never re-planned from
};

class MetricsSource {
 public:
  virtual ~MetricsSource() = default;
  // Unavailable when the metrics backend cannot be reached (the job then
  // runs on predictions with a Degraded condition).
  virtual StatusOr<Measurement> Measure(const JobRef& job) = 0;
};

class InventorySource {
 public:
  virtual ~InventorySource() = default;
  // The inventory with free GPUs as of now: GPUs held by running pods of any
  // job (this one included) are not free.
  virtual StatusOr<ClusterInventory> Current() = 0;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_RECONCILE_INTERFACES_H_
