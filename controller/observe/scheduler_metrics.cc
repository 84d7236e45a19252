#include "observe/scheduler_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace pacer::controller {

SchedulerMetrics::SchedulerMetrics(prometheus::Registry& registry) {
  auto& jobs = prometheus::BuildGauge()
                   .Name("pacer_scheduler_jobs")
                   .Help("TrainJobs by the last scheduler pass's verdict: running (admitted, "
                         "GPUs given), waiting (admitted, reserved GPUs start later), rejected.")
                   .Register(registry);
  // Created up front so that every state has a series from the first scrape.
  running_ = &jobs.Add({{"state", "running"}});
  waiting_ = &jobs.Add({{"state", "waiting"}});
  rejected_ = &jobs.Add({{"state", "rejected"}});
  allocated_gpus_ = &prometheus::BuildGauge()
                         .Name("pacer_scheduler_allocated_gpus")
                         .Help("GPUs the last scheduler pass gave to TrainJobs.")
                         .Register(registry)
                         .Add({});
  auto& resizes = prometheus::BuildCounter()
                      .Name("pacer_scheduler_resizes_total")
                      .Help("Decisions to resize a running TrainJob, by direction (grow, shrink).")
                      .Register(registry);
  grow_ = &resizes.Add({{"direction", "grow"}});
  shrink_ = &resizes.Add({{"direction", "shrink"}});
  passes_ = &prometheus::BuildCounter()
                 .Name("pacer_scheduler_passes_total")
                 .Help("Scheduler passes over all TrainJobs.")
                 .Register(registry)
                 .Add({});
  pass_seconds_ = &prometheus::BuildGauge()
                       .Name("pacer_scheduler_pass_duration_seconds")
                       .Help("Wall time of the last scheduler pass, in seconds.")
                       .Register(registry)
                       .Add({});
  auto& outcomes = prometheus::BuildGauge()
                       .Name("pacer_scheduler_deadline_jobs")
                       .Help("Finished TrainJobs with a deadline by outcome: met, or missed "
                             "(late, failed or infeasible).")
                       .Register(registry);
  met_ = &outcomes.Add({{"outcome", "met"}});
  missed_ = &outcomes.Add({{"outcome", "missed"}});
}

void SchedulerMetrics::RecordPass(const SchedulerCounts& counts, double seconds) {
  running_->Set(counts.running);
  waiting_->Set(counts.waiting);
  rejected_->Set(counts.rejected);
  allocated_gpus_->Set(counts.allocated_gpus);
  passes_->Increment();
  pass_seconds_->Set(seconds);
}

void SchedulerMetrics::AddResize(bool grow) { (grow ? grow_ : shrink_)->Increment(); }

void SchedulerMetrics::SetDeadlineOutcomes(int met, int missed) {
  met_->Set(met);
  missed_->Set(missed);
}

}  // namespace pacer::controller
