#include "pacer/sched/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "pacer_policy.h"

namespace pacer::sched {
namespace {

// ElasticFlow's EDF baseline: earliest deadline first (best effort last),
// each job the largest level that is free; no admission.
ScheduleResult ScheduleEdf(const std::vector<SchedJob>& jobs, int cluster_gpus) {
  std::vector<size_t> order(jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const double inf = std::numeric_limits<double>::infinity();
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double da = jobs[a].deadline_seconds.value_or(inf);
    const double db = jobs[b].deadline_seconds.value_or(inf);
    if (da != db) return da < db;
    if (jobs[a].arrival_seconds != jobs[b].arrival_seconds) {
      return jobs[a].arrival_seconds < jobs[b].arrival_seconds;
    }
    return jobs[a].id < jobs[b].id;
  });
  ScheduleResult result;
  result.decisions.resize(jobs.size());
  int free = cluster_gpus;
  for (size_t i : order) {
    result.decisions[i].id = jobs[i].id;
    result.decisions[i].gpus = jobs[i].curve.FloorLevel(free);
    free -= result.decisions[i].gpus;
  }
  return result;
}

// First come, first served: running jobs keep their GPUs; waiting jobs start,
// in arrival order, on the largest level that is free.
ScheduleResult ScheduleFifo(const std::vector<SchedJob>& jobs, int cluster_gpus) {
  ScheduleResult result;
  result.decisions.resize(jobs.size());
  int free = cluster_gpus;
  std::vector<size_t> waiting;
  for (size_t i = 0; i < jobs.size(); ++i) {
    result.decisions[i].id = jobs[i].id;
    if (jobs[i].current_gpus > 0) {
      result.decisions[i].gpus = jobs[i].current_gpus;
      free -= jobs[i].current_gpus;
    } else {
      waiting.push_back(i);
    }
  }
  std::sort(waiting.begin(), waiting.end(), [&](size_t a, size_t b) {
    if (jobs[a].arrival_seconds != jobs[b].arrival_seconds) {
      return jobs[a].arrival_seconds < jobs[b].arrival_seconds;
    }
    return jobs[a].id < jobs[b].id;
  });
  for (size_t i : waiting) {
    result.decisions[i].gpus = jobs[i].curve.FloorLevel(free);
    free -= result.decisions[i].gpus;
  }
  return result;
}

// The plans compare and split times: a NaN or infinite one makes those
// comparisons meaningless (FreeTimeline::Split's order is undefined on NaN),
// so it is refused here, where the caller can say which input was wrong.
Status CheckOptions(double now_seconds, const SchedOptions& options) {
  if (!std::isfinite(now_seconds)) return InvalidArgumentError("now is not a finite time");
  if (!std::isfinite(options.decision_interval_seconds) || options.decision_interval_seconds < 0) {
    return InvalidArgumentError("the decision interval must be a finite number of seconds >= 0");
  }
  if (!std::isfinite(options.deadline_guard_seconds) || options.deadline_guard_seconds < 0) {
    return InvalidArgumentError("the deadline guard must be a finite number of seconds >= 0");
  }
  // Past 0..0.5 it is clamped, as a measured share may be; NaN is no share.
  if (std::isnan(options.overhead_fraction)) {
    return InvalidArgumentError("the restart overhead fraction is not a number");
  }
  if (!std::isfinite(options.hysteresis_factor) || options.hysteresis_factor < 0 ||
      !std::isfinite(options.stall_headroom_factor) || options.stall_headroom_factor < 0) {
    return InvalidArgumentError(
        "the hysteresis and stall headroom factors must be finite and >= 0");
  }
  return Status::Ok();
}

Status CheckTimes(const SchedJob& job) {
  if (!std::isfinite(job.remaining_iterations)) {
    return InvalidArgumentError("job " + job.id + " has no finite remaining iterations");
  }
  if (!std::isfinite(job.arrival_seconds)) {
    return InvalidArgumentError("job " + job.id + " has no finite arrival time");
  }
  if (job.deadline_seconds && !std::isfinite(*job.deadline_seconds)) {
    return InvalidArgumentError("job " + job.id +
                                " has a deadline that is not a finite time; leave it out for "
                                "best effort");
  }
  // A kept span is clipped to [now, deadline] and dropped when empty, so
  // only a NaN end (which no clip orders) is unusable.
  for (const ReservedSpan& span : job.reservation) {
    if (std::isnan(span.start_seconds) || std::isnan(span.end_seconds)) {
      return InvalidArgumentError("job " + job.id +
                                  " carries a reservation span whose start or end is not a "
                                  "number; pass back the one Schedule returned");
    }
  }
  return Status::Ok();
}

}  // namespace

const char* PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kPacer:
      return "pacer";
    case Policy::kEdf:
      return "edf";
    case Policy::kFifo:
      return "fifo";
  }
  return "pacer";
}

StatusOr<Policy> ParsePolicy(const std::string& name) {
  for (Policy policy : {Policy::kPacer, Policy::kEdf, Policy::kFifo}) {
    if (name == PolicyName(policy)) return policy;
  }
  return InvalidArgumentError("unknown policy '" + name + "'; use pacer, edf or fifo");
}

double RestartModel::RelaunchSeconds(int gpus) const {
  return keep_seconds + per_doubling_seconds * (std::log2(std::max(gpus, 1)) + 1.0);
}

RestartModel RestartModel::ElasticFlow(int cluster_gpus) {
  RestartModel model;
  if (cluster_gpus >= 256) {
    model.keep_seconds = 7;
    model.restart_round_seconds = 47;
  }
  return model;
}

RestartModel RestartModel::None() {
  RestartModel model;
  model.keep_seconds = 0;
  model.per_doubling_seconds = 0;
  model.restart_round_seconds = 0;
  return model;
}

StatusOr<ScheduleResult> Schedule(const std::vector<SchedJob>& jobs, int cluster_gpus,
                                  double now_seconds, const SchedOptions& options) {
  if (cluster_gpus < 1) return InvalidArgumentError("the pool needs at least one GPU");
  RETURN_IF_ERROR(CheckOptions(now_seconds, options));
  int64_t held = 0;
  for (const SchedJob& job : jobs) {
    if (!(job.remaining_iterations > 0)) {
      return InvalidArgumentError("job " + job.id + " has no remaining iterations; drop it");
    }
    RETURN_IF_ERROR(CheckTimes(job));
    if (job.curve.levels().empty()) {
      return InvalidArgumentError("job " + job.id + " has no throughput curve");
    }
    if (job.current_gpus < 0) {
      return InvalidArgumentError("job " + job.id + " holds a negative GPU count");
    }
    held += job.current_gpus;
  }
  if (held > cluster_gpus) {
    return InvalidArgumentError("jobs hold " + std::to_string(held) + " GPUs, the pool has " +
                                std::to_string(cluster_gpus));
  }
  switch (options.policy) {
    case Policy::kEdf:
      return ScheduleEdf(jobs, cluster_gpus);
    case Policy::kFifo:
      return ScheduleFifo(jobs, cluster_gpus);
    case Policy::kPacer:
      break;
  }
  return SchedulePacer(jobs, cluster_gpus, now_seconds, options);
}

}  // namespace pacer::sched
