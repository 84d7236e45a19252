// SchedulerMetrics: what the cluster scheduler's passes decided
// (reconcile/cluster_scheduler.h), in the controller's registry. Names and
// meaning: docs/metrics.md ("Scheduler metrics").
//
//   pacer_scheduler_jobs{state}              jobs by the last pass's verdict:
//                                            running (admitted, GPUs given),
//                                            waiting (admitted, reserved
//                                            GPUs start later), rejected
//   pacer_scheduler_allocated_gpus           GPUs given out by the last pass
//   pacer_scheduler_resizes_total{direction} grow / shrink decisions
//   pacer_scheduler_passes_total             passes run
//   pacer_scheduler_pass_duration_seconds    the last pass's wall time
//   pacer_scheduler_deadline_jobs{outcome}   finished jobs with a deadline:
//                                            met, or missed (late, failed or
//                                            infeasible); the deadline ratio
//                                            is met / (met + missed)
//
// Units: seconds, GPUs, jobs. Thread-safety: all methods may be called
// concurrently (prometheus-cpp metrics are atomic).
#ifndef PACER_CONTROLLER_OBSERVE_SCHEDULER_METRICS_H_
#define PACER_CONTROLLER_OBSERVE_SCHEDULER_METRICS_H_

#include <memory>

namespace prometheus {
class Counter;
class Gauge;
class Registry;
}  // namespace prometheus

namespace pacer::controller {

struct SchedulerCounts {
  int running = 0;
  int waiting = 0;
  int rejected = 0;
  int allocated_gpus = 0;
};

class SchedulerMetrics {
 public:
  explicit SchedulerMetrics(prometheus::Registry& registry);

  void RecordPass(const SchedulerCounts& counts, double seconds);
  void AddResize(bool grow);
  void SetDeadlineOutcomes(int met, int missed);

 private:
  prometheus::Gauge* running_ = nullptr;
  prometheus::Gauge* waiting_ = nullptr;
  prometheus::Gauge* rejected_ = nullptr;
  prometheus::Gauge* allocated_gpus_ = nullptr;
  prometheus::Counter* grow_ = nullptr;
  prometheus::Counter* shrink_ = nullptr;
  prometheus::Counter* passes_ = nullptr;
  prometheus::Gauge* pass_seconds_ = nullptr;
  prometheus::Gauge* met_ = nullptr;
  prometheus::Gauge* missed_ = nullptr;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_OBSERVE_SCHEDULER_METRICS_H_
