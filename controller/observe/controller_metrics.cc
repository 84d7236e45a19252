#include "observe/controller_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
#include <cmath>

#ifndef PACER_VERSION
#define PACER_VERSION "unknown"
#endif

namespace pacer::controller {
namespace {

// The per-job gauges, in one table so that SetJob and RemoveJob cannot
// forget one.
struct JobGaugeSpec {
  const char* name;
  const char* help;
  std::optional<double> JobMetrics::*field;
};

constexpr std::array<JobGaugeSpec, 7> kJobGauges = {{
    {"pacer_trainjob_predicted_step_seconds",
     "Step time the current plan predicts for the TrainJob, in seconds.",
     &JobMetrics::predicted_step_seconds},
    {"pacer_trainjob_measured_step_seconds",
     "Step time the TrainJob's workers measure (mean over the query window), in seconds.",
     &JobMetrics::measured_step_seconds},
    {"pacer_trainjob_projected_completion_timestamp_seconds",
     "When the TrainJob is projected to finish at its measured pace, as Unix seconds.",
     &JobMetrics::projected_completion_timestamp_seconds},
    {"pacer_trainjob_deadline_timestamp_seconds", "The TrainJob's deadline, as Unix seconds.",
     &JobMetrics::deadline_timestamp_seconds},
    {"pacer_trainjob_deadline_slack_seconds",
     "Deadline minus projected completion, in seconds; negative when the job is late.",
     &JobMetrics::deadline_slack_seconds},
    {"pacer_trainjob_gpus", "GPUs the TrainJob's current plan uses.", &JobMetrics::gpus},
    {"pacer_trainjob_progress_ratio", "Fraction of the TrainJob's steps completed, 0 to 1.",
     &JobMetrics::progress_ratio},
}};

prometheus::Labels JobLabels(const std::string& namespace_name, const std::string& name) {
  return {{"namespace", namespace_name}, {"trainjob", name}};
}

}  // namespace

struct ControllerMetrics::JobSeries {
  std::array<prometheus::Gauge*, kJobGauges.size()> gauges{};
  std::map<std::string, prometheus::Gauge*> phases;  // phase name -> series
  prometheus::Counter* replans = nullptr;
  prometheus::Counter* restarts = nullptr;
};

const std::vector<std::string>& ControllerMetrics::KnownPhases() {
  static const std::vector<std::string> kPhases = {
      "Pending", "Planning", "Running", "Replanning", "Succeeded", "Failed", "Infeasible"};
  return kPhases;
}

// Reconciles range from sub-millisecond (nothing changed) to seconds (a plan
// search and several API writes); doubling keeps the relative error of a
// quantile the same across that range.
std::vector<double> ControllerMetrics::ReconcileDurationBuckets() {
  std::vector<double> bounds;
  for (int k = 0; k < 16; ++k) bounds.push_back(0.0005 * std::ldexp(1.0, k));
  return bounds;
}

ControllerMetrics::ControllerMetrics() : ControllerMetrics(PACER_VERSION) {}

ControllerMetrics::ControllerMetrics(std::string version)
    : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& registry = *registry_;

  reconcile_total_ = &prometheus::BuildCounter()
                          .Name("pacer_controller_reconcile_total")
                          .Help("Reconciles of TrainJobs by result: success, error or requeue.")
                          .Register(registry);
  // Created up front so that rate() sees every result from the first scrape.
  reconcile_success_ = &reconcile_total_->Add({{"result", "success"}});
  reconcile_error_ = &reconcile_total_->Add({{"result", "error"}});
  reconcile_requeue_ = &reconcile_total_->Add({{"result", "requeue"}});

  reconcile_errors_ = &prometheus::BuildCounter()
                           .Name("pacer_controller_reconcile_errors_total")
                           .Help(
                               "Failed reconciles by reason, the status code name "
                               "(UNAVAILABLE, ABORTED, ...).")
                           .Register(registry);

  reconcile_duration_ = &prometheus::BuildHistogram()
                             .Name("pacer_controller_reconcile_duration_seconds")
                             .Help("Wall time of one reconcile, in seconds.")
                             .Register(registry)
                             .Add({}, ReconcileDurationBuckets());

  queue_depth_ = &prometheus::BuildGauge()
                      .Name("pacer_controller_workqueue_depth")
                      .Help("TrainJobs waiting in the work queue.")
                      .Register(registry)
                      .Add({});
  queue_adds_ = &prometheus::BuildCounter()
                     .Name("pacer_controller_workqueue_adds_total")
                     .Help("Keys added to the work queue.")
                     .Register(registry)
                     .Add({});
  reconcile_panics_ = &prometheus::BuildCounter()
                           .Name("pacer_controller_reconcile_panics_total")
                           .Help(
                               "Reconciles that threw an exception; the key was requeued "
                               "with backoff. Any increase is a controller bug.")
                           .Register(registry)
                           .Add({});
  leader_ = &prometheus::BuildGauge()
                 .Name("pacer_controller_leader")
                 .Help("1 while this controller replica holds the leader lease, else 0.")
                 .Register(registry)
                 .Add({});
  prometheus::BuildGauge()
      .Name("pacer_controller_build_info")
      .Help("Always 1; the label version names the controller's build.")
      .Register(registry)
      .Add({{"version", std::move(version)}})
      .Set(1);

  for (const JobGaugeSpec& spec : kJobGauges) {
    job_gauges_.push_back(
        &prometheus::BuildGauge().Name(spec.name).Help(spec.help).Register(registry));
  }
  phase_ = &prometheus::BuildGauge()
                .Name("pacer_trainjob_phase")
                .Help("1 for the TrainJob's current phase, 0 for the other phases.")
                .Register(registry);
  replans_ = &prometheus::BuildCounter()
                  .Name("pacer_trainjob_replans_total")
                  .Help("Times the controller re-planned the TrainJob.")
                  .Register(registry);
  restarts_ = &prometheus::BuildCounter()
                   .Name("pacer_trainjob_restarts_total")
                   .Help("Times the TrainJob's workers were relaunched (re-plan, failure).")
                   .Register(registry);
}

ControllerMetrics::~ControllerMetrics() = default;

void ControllerMetrics::RecordReconcile(double seconds, const Status& result, bool requeued) {
  if (!result.ok()) {
    reconcile_error_->Increment();
    reconcile_errors_->Add({{"reason", std::string(StatusCodeName(result.code()))}}).Increment();
  } else if (requeued) {
    reconcile_requeue_->Increment();
  } else {
    reconcile_success_->Increment();
  }
  // A NaN would poison _sum forever; a clock step backwards is not a duration.
  if (std::isfinite(seconds)) reconcile_duration_->Observe(std::max(seconds, 0.0));
}

void ControllerMetrics::SetQueueDepth(int depth) { queue_depth_->Set(depth); }

void ControllerMetrics::CountQueueAdd() { queue_adds_->Increment(); }

void ControllerMetrics::CountReconcilePanic() { reconcile_panics_->Increment(); }

void ControllerMetrics::SetLeader(bool leading) { leader_->Set(leading ? 1 : 0); }

ControllerMetrics::JobSeries& ControllerMetrics::SeriesLocked(const std::string& namespace_name,
                                                              const std::string& name) {
  std::unique_ptr<JobSeries>& series = jobs_[JobKey(namespace_name, name)];
  if (series == nullptr) {
    series = std::make_unique<JobSeries>();
    const prometheus::Labels labels = JobLabels(namespace_name, name);
    series->replans = &replans_->Add(labels);
    series->restarts = &restarts_->Add(labels);
  }
  return *series;
}

void ControllerMetrics::SetPhaseLocked(JobSeries& series, const JobKey& key,
                                       const std::string& phase) {
  // Drop what should not be there: everything for an empty phase, and an
  // unknown phase the job has left.
  const std::vector<std::string>& known = KnownPhases();
  for (auto it = series.phases.begin(); it != series.phases.end();) {
    const bool is_known = std::find(known.begin(), known.end(), it->first) != known.end();
    if (phase.empty() || (!is_known && it->first != phase)) {
      phase_->Remove(it->second);
      it = series.phases.erase(it);
    } else {
      ++it;
    }
  }
  if (phase.empty()) return;

  auto ensure = [&](const std::string& name) {
    prometheus::Gauge*& gauge = series.phases[name];
    if (gauge == nullptr) {
      prometheus::Labels labels = JobLabels(key.first, key.second);
      labels["phase"] = name;
      gauge = &phase_->Add(labels);
    }
  };
  for (const std::string& name : known) ensure(name);
  ensure(phase);
  for (auto& [name, gauge] : series.phases) gauge->Set(name == phase ? 1 : 0);
}

void ControllerMetrics::SetJob(const JobMetrics& job) {
  std::lock_guard<std::mutex> lock(mu_);
  JobSeries& series = SeriesLocked(job.namespace_name, job.name);
  for (size_t i = 0; i < kJobGauges.size(); ++i) {
    const std::optional<double>& value = job.*(kJobGauges[i].field);
    prometheus::Gauge*& gauge = series.gauges[i];
    if (!value.has_value()) {
      if (gauge != nullptr) job_gauges_[i]->Remove(gauge);
      gauge = nullptr;
      continue;
    }
    if (gauge == nullptr) gauge = &job_gauges_[i]->Add(JobLabels(job.namespace_name, job.name));
    double v = *value;
    if (kJobGauges[i].field == &JobMetrics::progress_ratio) v = std::clamp(v, 0.0, 1.0);
    gauge->Set(v);
  }
  SetPhaseLocked(series, JobKey(job.namespace_name, job.name), job.phase);
}

void ControllerMetrics::AddReplan(const std::string& namespace_name, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  SeriesLocked(namespace_name, name).replans->Increment();
}

void ControllerMetrics::AddRestart(const std::string& namespace_name, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  SeriesLocked(namespace_name, name).restarts->Increment();
}

void ControllerMetrics::RemoveJob(const std::string& namespace_name, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(JobKey(namespace_name, name));
  if (it == jobs_.end()) return;
  JobSeries& series = *it->second;
  for (size_t i = 0; i < kJobGauges.size(); ++i) {
    if (series.gauges[i] != nullptr) job_gauges_[i]->Remove(series.gauges[i]);
  }
  for (auto& [phase, gauge] : series.phases) phase_->Remove(gauge);
  replans_->Remove(series.replans);
  restarts_->Remove(series.restarts);
  jobs_.erase(it);
}

std::string ControllerMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace pacer::controller
