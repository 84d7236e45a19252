#include "pacer/sched/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pacer::sched {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A job that has arrived and is neither finished nor rejected.
struct LiveJob {
  size_t index = 0;  // into the input
  SchedJob job;
  double pending_overhead_seconds = 0;  // restart stall still to sit out
  std::optional<size_t> last_span;      // to extend while the size holds
};

}  // namespace

double SimResult::deadline_ratio() const {
  return jobs_with_deadline == 0 ? 1.0 : static_cast<double>(met_deadline) / jobs_with_deadline;
}

StatusOr<SimResult> Simulate(const std::vector<SimJob>& jobs, const SimOptions& options) {
  if (jobs.empty()) return InvalidArgumentError("the trace has no jobs");
  if (options.cluster_gpus < 1) return InvalidArgumentError("the pool needs at least one GPU");
  for (const SimJob& job : jobs) {
    if (job.curve.levels().empty() || job.curve.min_gpus() > options.cluster_gpus) {
      return InvalidArgumentError("job " + job.id + " needs at least " +
                                  std::to_string(job.curve.min_gpus()) + " GPUs, the pool has " +
                                  std::to_string(options.cluster_gpus));
    }
    if (!(options.sched.decision_interval_seconds >= 0)) {
      return InvalidArgumentError("the decision interval must be 0 seconds or more");
    }
    if (!(job.iterations > 0)) {
      return InvalidArgumentError("job " + job.id + " has no iterations to run");
    }
  }
  const RestartModel& restart = options.sched.restart;
  std::vector<size_t> order(jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return jobs[a].arrival_seconds < jobs[b].arrival_seconds;
  });

  SimResult result;
  result.outcomes.resize(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    result.outcomes[i].id = jobs[i].id;
    if (jobs[i].deadline_seconds) ++result.jobs_with_deadline;
  }
  result.start_seconds = jobs[order.front()].arrival_seconds;
  result.end_seconds = result.start_seconds;

  std::vector<LiveJob> live;
  std::vector<SchedJob> sched_jobs;
  // Restart stalls measured so far, fed back into the plans (as the
  // controller will feed back measured restart times).
  SchedOptions sched_options = options.sched;
  double stalled_seconds = 0;
  double running_seconds = 0;
  size_t next_arrival = 0;
  double now = result.start_seconds;
  while (true) {
    while (next_arrival < order.size() && jobs[order[next_arrival]].arrival_seconds <= now) {
      const SimJob& in = jobs[order[next_arrival]];
      LiveJob entry;
      entry.index = order[next_arrival];
      entry.job.id = in.id;
      entry.job.arrival_seconds = in.arrival_seconds;
      entry.job.remaining_iterations = in.iterations;
      entry.job.deadline_seconds = in.deadline_seconds;
      entry.job.curve = in.curve;
      live.push_back(std::move(entry));
      ++next_arrival;
    }
    if (live.empty()) {
      if (next_arrival == order.size()) break;
      now = jobs[order[next_arrival]].arrival_seconds;
      continue;
    }

    // Decide.
    sched_jobs.clear();
    for (const LiveJob& entry : live) sched_jobs.push_back(entry.job);
    sched_options.overhead_fraction = running_seconds > 0 ? stalled_seconds / running_seconds : 0;
    ASSIGN_OR_RETURN(ScheduleResult decided,
                     Schedule(sched_jobs, options.cluster_gpus, now, sched_options));
    ++result.decisions;
    const bool restart_round =
        restart.restart_round_events > 0 && result.decisions % restart.restart_round_events == 0;
    std::vector<LiveJob> kept;
    kept.reserve(live.size());
    for (size_t k = 0; k < live.size(); ++k) {
      LiveJob& entry = live[k];
      const JobDecision& decision = decided.decisions[k];
      JobOutcome& outcome = result.outcomes[entry.index];
      if (decision.admission == Admission::kRejected) {
        outcome.admitted = false;
        outcome.reject_reason = decision.reason;
        ++result.rejected;
        continue;
      }
      if (!entry.job.admitted) ++result.admitted;
      entry.job.admitted = true;
      const int before = entry.job.current_gpus;
      const int after = decision.gpus;
      if (after > 0) {
        entry.pending_overhead_seconds +=
            after == before ? restart.keep_seconds : restart.RelaunchSeconds(after);
        if (restart_round) entry.pending_overhead_seconds += restart.restart_round_seconds;
        if (before > 0 && after != before) {
          ++outcome.resizes;
          ++result.resizes;
        }
      } else {
        entry.pending_overhead_seconds = 0;  // a stopped job pays when it restarts
      }
      if (after != before) entry.last_span.reset();
      entry.job.current_gpus = after;
      entry.job.reservation = decision.reservation;
      kept.push_back(std::move(entry));
    }
    live = std::move(kept);

    // The next decision: an arrival, a completion or a reservation starting.
    double next = next_arrival < order.size() ? jobs[order[next_arrival]].arrival_seconds : kInf;
    if (decided.next_wakeup_seconds && *decided.next_wakeup_seconds > now) {
      next = std::min(next, *decided.next_wakeup_seconds);
    }
    std::vector<double> finish(live.size(), kInf);
    for (size_t k = 0; k < live.size(); ++k) {
      const SchedJob& job = live[k].job;
      if (job.current_gpus == 0) continue;
      finish[k] = now + live[k].pending_overhead_seconds +
                  job.remaining_iterations / job.curve.IterationsPerSecond(job.current_gpus);
      next = std::min(next, finish[k]);
    }
    if (std::isinf(next)) break;  // nothing runs and nothing will arrive
    next = std::max(next, now + options.sched.decision_interval_seconds);

    // Advance every running job to `next`.
    const double elapsed = next - now;
    std::vector<LiveJob> running;
    running.reserve(live.size());
    for (size_t k = 0; k < live.size(); ++k) {
      LiveJob& entry = live[k];
      SchedJob& job = entry.job;
      if (job.current_gpus > 0) {
        const double span_end = std::min(next, finish[k]);
        if (entry.last_span && result.spans[*entry.last_span].end_seconds == now) {
          result.spans[*entry.last_span].end_seconds = span_end;
        } else {
          entry.last_span = result.spans.size();
          result.spans.push_back({entry.index, now, span_end, job.current_gpus});
        }
        result.gpu_seconds_used += (span_end - now) * job.current_gpus;
        // Within rounding of the pass: plans end exactly at deadlines, and
        // the sliver rounding left made a job on time late by a pass.
        if (finish[k] <= next + 1e-9 * std::max(1.0, std::fabs(next))) {
          JobOutcome& outcome = result.outcomes[entry.index];
          outcome.finished = true;
          outcome.finish_seconds = finish[k];
          const std::optional<double>& deadline = jobs[entry.index].deadline_seconds;
          outcome.met_deadline =
              !deadline || finish[k] <= *deadline + 1e-9 * std::max(1.0, std::fabs(*deadline));
          if (deadline && outcome.met_deadline) ++result.met_deadline;
          if (deadline && !outcome.met_deadline) ++result.admitted_missed;
          result.end_seconds = std::max(result.end_seconds, finish[k]);
          continue;
        }
        const double stalled = std::min(entry.pending_overhead_seconds, elapsed);
        entry.pending_overhead_seconds -= stalled;
        stalled_seconds += stalled;
        result.outcomes[entry.index].stalled_seconds += stalled;
        running_seconds += elapsed;
        job.remaining_iterations -=
            (elapsed - stalled) * job.curve.IterationsPerSecond(job.current_gpus);
        // Rounding can leave a sliver; the completion above owns the end.
        job.remaining_iterations = std::max(job.remaining_iterations, 1e-9);
      }
      running.push_back(std::move(entry));
    }
    live = std::move(running);
    now = next;
  }
  for (const JobOutcome& outcome : result.outcomes) {
    if (outcome.finished)
      result.end_seconds = std::max(result.end_seconds, *outcome.finish_seconds);
  }
  const double span = result.end_seconds - result.start_seconds;
  result.utilisation =
      span > 0 ? result.gpu_seconds_used / (static_cast<double>(options.cluster_gpus) * span) : 0;
  std::stable_sort(result.spans.begin(), result.spans.end(),
                   [](const AllocationSpan& a, const AllocationSpan& b) {
                     return a.start_seconds < b.start_seconds;
                   });
  return result;
}

}  // namespace pacer::sched
