// The kPacer policy behind Schedule() (pacer/sched/scheduler.h): admission by
// minimum satisfactory share, leftover GPUs by marginal return, resize
// hysteresis. Internal; inputs are validated by Schedule().
// Thread-safety: pure.
#ifndef PACER_SCHED_PACER_POLICY_H_
#define PACER_SCHED_PACER_POLICY_H_

#include <vector>

#include "pacer/sched/scheduler.h"

namespace pacer::sched {

ScheduleResult SchedulePacer(const std::vector<SchedJob>& jobs, int cluster_gpus,
                             double now_seconds, const SchedOptions& options);

}  // namespace pacer::sched

#endif  // PACER_SCHED_PACER_POLICY_H_
