// ControllerMetrics: what the controller exports about itself and about the
// TrainJobs it manages, in one prometheus-cpp Registry served at /metrics by
// HealthServer (observe/health_server.h). Names, labels and meaning are
// documented in docs/metrics.md ("Controller metrics").
//
// Controller series follow controller-runtime's: reconcile counts by result
// and errors by reason (a StatusCodeName such as UNAVAILABLE), reconcile
// duration, work-queue depth and adds, leadership and build info. Per-job
// series carry the labels namespace and trainjob, and RemoveJob deletes every
// one of them, so a deleted job leaves no stale series behind. The phase is
// one-hot like kube-state-metrics' kube_pod_status_phase: one series per
// known phase, 1 for the current one and 0 for the others.
//
// Units: seconds; *_timestamp_seconds are Unix seconds; progress_ratio is a
// fraction 0..1.
//
// Thread-safety: all methods may be called concurrently. Each update is
// atomic; the updates of one SetJob are not one transaction, so a scrape may
// see a job half-updated.
#ifndef PACER_CONTROLLER_OBSERVE_CONTROLLER_METRICS_H_
#define PACER_CONTROLLER_OBSERVE_CONTROLLER_METRICS_H_

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pacer/status.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace pacer::controller {

// What the controller knows about one TrainJob. An absent gauge value removes
// its series (a dashboard then shows "no data" rather than a stale or made-up
// number).
struct JobMetrics {
  std::string namespace_name;  // exported as label "namespace"
  std::string name;            // exported as label "trainjob"

  std::optional<double> predicted_step_seconds;                  // the plan's step time
  std::optional<double> measured_step_seconds;                   // from the workers, via Prometheus
  std::optional<double> projected_completion_timestamp_seconds;  // Unix s
  std::optional<double> deadline_timestamp_seconds;              // Unix s
  std::optional<double> deadline_slack_seconds;  // deadline - projected completion; < 0 = late
  std::optional<double> gpus;                    // GPUs of the running plan
  std::optional<double> progress_ratio;          // steps done / total, clamped to 0..1

  // "Pending", "Planning", "Running", "Replanning", "Succeeded", "Failed",
  // "Infeasible" (docs/trainjob-reference.md); another name gets its own
  // series as well. Empty removes the phase series.
  std::string phase;
};

class ControllerMetrics {
 public:
  // The phases exported one-hot (each gets a 0 or 1 series).
  static const std::vector<std::string>& KnownPhases();
  // Bucket upper bounds of pacer_controller_reconcile_duration_seconds:
  // 0.5 ms doubling to 16.4 s.
  static std::vector<double> ReconcileDurationBuckets();

  // build_info carries this build's version.
  ControllerMetrics();
  // build_info carries `version` (tests, or a version from elsewhere).
  explicit ControllerMetrics(std::string version);
  ~ControllerMetrics();
  ControllerMetrics(const ControllerMetrics&) = delete;
  ControllerMetrics& operator=(const ControllerMetrics&) = delete;

  // One reconcile took `seconds`: result="error" if !result.ok() (and its
  // code counted in reconcile_errors_total), else "requeue" if `requeued`,
  // else "success".
  void RecordReconcile(double seconds, const Status& result, bool requeued);
  void SetQueueDepth(int depth);
  void CountQueueAdd();
  // A reconcile threw an exception that the work-queue loop caught
  // (pacer_controller_reconcile_panics_total, after controller-runtime's
  // controller_runtime_reconcile_panics_total): a controller bug to report.
  void CountReconcilePanic();
  void SetLeader(bool leading);

  // Creates or updates the job's series (and its counters, at 0 when new).
  void SetJob(const JobMetrics& job);
  void AddReplan(const std::string& namespace_name, const std::string& name);
  void AddRestart(const std::string& namespace_name, const std::string& name);
  // Removes every series of the job; a no-op for an unknown job.
  void RemoveJob(const std::string& namespace_name, const std::string& name);

  // The registry to serve (HealthServer) or to register more families in.
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // Everything in the registry in the Prometheus text exposition format.
  std::string Serialize() const;

 private:
  // A job's children of each per-job family; null = no series.
  struct JobSeries;
  using JobKey = std::pair<std::string, std::string>;  // namespace, name

  // Requires mu_. Finds or creates the job's entry.
  JobSeries& SeriesLocked(const std::string& namespace_name, const std::string& name);
  // Requires mu_. Sets the phase series, or removes them for an empty phase.
  void SetPhaseLocked(JobSeries& series, const JobKey& key, const std::string& phase);

  std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Family<prometheus::Counter>* reconcile_total_ = nullptr;
  prometheus::Counter* reconcile_success_ = nullptr;
  prometheus::Counter* reconcile_error_ = nullptr;
  prometheus::Counter* reconcile_requeue_ = nullptr;
  prometheus::Family<prometheus::Counter>* reconcile_errors_ = nullptr;
  prometheus::Histogram* reconcile_duration_ = nullptr;
  prometheus::Gauge* queue_depth_ = nullptr;
  prometheus::Counter* queue_adds_ = nullptr;
  prometheus::Counter* reconcile_panics_ = nullptr;
  prometheus::Gauge* leader_ = nullptr;

  // Per-job families, in the order of JobSeries' gauges.
  std::vector<prometheus::Family<prometheus::Gauge>*> job_gauges_;
  prometheus::Family<prometheus::Gauge>* phase_ = nullptr;
  prometheus::Family<prometheus::Counter>* replans_ = nullptr;
  prometheus::Family<prometheus::Counter>* restarts_ = nullptr;

  std::mutex mu_;
  std::map<JobKey, std::unique_ptr<JobSeries>> jobs_;  // guarded by mu_
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_OBSERVE_CONTROLLER_METRICS_H_
