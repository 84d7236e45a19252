#include "min_share.h"

#include <algorithm>
#include <vector>

namespace pacer::sched {

double StallHeadroom(const SchedOptions& options) {
  if (options.decision_interval_seconds <= 0) return 0;
  const RestartModel& r = options.restart;
  const double per_pass =
      r.keep_seconds +
      (r.restart_round_events > 0 ? r.restart_round_seconds / r.restart_round_events : 0);
  return options.stall_headroom_factor * per_pass / options.decision_interval_seconds;
}

double NeededIterations(const SchedJob& job, int level, double iterations_per_second,
                        const SchedOptions& options) {
  const double fraction = std::max(options.overhead_fraction, StallHeadroom(options));
  double need = job.remaining_iterations / (1.0 - std::clamp(fraction, 0.0, 0.5));
  // Starting or resizing stalls the job for a relaunch; count it as work at
  // the level's rate (an over-estimate where fewer GPUs are free).
  if (level != job.current_gpus) {
    need += options.restart.RelaunchSeconds(level) * iterations_per_second;
  }
  return need;
}

namespace {

// The curve's floor level and its rate at a GPU count by bisection: the
// admission scan asks once per level per segment, and the curve's own
// lookups walk its levels (most of a pass with thousands of segments). Not
// a table over 0..max_gpus: a curve may reach a cluster's 100,000 GPUs.
class FloorLookup {
 public:
  explicit FloorLookup(const ThroughputCurve& curve) : levels_(curve.levels()) {}
  // As curve.FloorLevel(gpus) and curve.IterationsPerSecond(gpus).
  int Level(int gpus) const {
    const ThroughputPoint* p = Floor(gpus);
    return p ? p->gpus : 0;
  }
  double Rate(int gpus) const {
    const ThroughputPoint* p = Floor(gpus);
    return p ? p->iterations_per_second : 0.0;
  }

 private:
  const ThroughputPoint* Floor(int gpus) const {
    if (levels_.empty() || gpus < levels_.front().gpus) return nullptr;
    if (gpus >= levels_.back().gpus) return &levels_.back();
    auto above = std::upper_bound(levels_.begin(), levels_.end(), gpus,
                                  [](int g, const ThroughputPoint& p) { return g < p.gpus; });
    return &*(above - 1);
  }
  const std::vector<ThroughputPoint>& levels_;
};

}  // namespace

Reservation ReserveMinShare(const SchedJob& job, double now_seconds, const SchedOptions& options,
                            bool reserve_if_infeasible, FreeTimeline& free) {
  Reservation result;
  const double deadline = *job.deadline_seconds - options.deadline_guard_seconds;
  if (deadline <= now_seconds) return result;
  const size_t end_index = free.Split(deadline);  // segments [0, end_index) lie before it
  const ThroughputCurve& curve = job.curve;
  const FloorLookup floor(curve);
  // A segment's usable GPUs at share q: the largest level within q and free.
  auto usable = [&](size_t i, int q) { return floor.Level(std::min(q, free.free(i))); };

  for (const ThroughputPoint& level : curve.levels()) {
    const int q = level.gpus;
    double need = NeededIterations(job, q, level.iterations_per_second, options);
    for (size_t i = end_index; i-- > 0;) {
      const double rate = floor.Rate(std::min(q, free.free(i)));
      const double length = std::min(free.end(i), deadline) - free.start(i);
      if (rate * length >= need) {
        // Latest start: the job runs from `start` to the deadline.
        const double start = std::min(free.end(i), deadline) - need / rate;
        result.feasible = true;
        result.level = q;
        result.finish_seconds = deadline;
        result.segments.reserve(end_index - i);
        result.segments.push_back({start, std::min(free.end(i), deadline), usable(i, q)});
        for (size_t k = i + 1; k < end_index; ++k) {
          result.segments.push_back({free.start(k), free.end(k), usable(k, q)});
        }
        size_t at = 0;
        for (const PlanSegment& s : result.segments) {
          at = free.Reserve(s.start_seconds, s.end_seconds, s.gpus, at);
        }
        return result;
      }
      need -= rate * length;
    }
  }
  // Infeasible: hold the most it can get before the deadline.
  const int top = curve.max_gpus();
  result.level = top;
  if (!reserve_if_infeasible) return result;
  result.segments.reserve(end_index);
  for (size_t i = 0; i < end_index; ++i) {
    result.segments.push_back({free.start(i), free.end(i), usable(i, top)});
  }
  size_t at = 0;
  for (const PlanSegment& s : result.segments) {
    at = free.Reserve(s.start_seconds, s.end_seconds, s.gpus, at);
  }
  return result;
}

bool KeepReservation(const SchedJob& job, double now_seconds, const SchedOptions& options,
                     FreeTimeline& free, Reservation& kept) {
  if (job.reservation.empty() || !job.deadline_seconds) return false;
  const double deadline = *job.deadline_seconds - options.deadline_guard_seconds;
  std::vector<PlanSegment> segments;
  segments.reserve(job.reservation.size());
  double work = 0;
  size_t at = 0;  // where the next span's search starts (spans ascend)
  for (PlanSegment s : job.reservation) {
    s.start_seconds = std::max(s.start_seconds, now_seconds);
    s.end_seconds = std::min(s.end_seconds, deadline);
    // A span clipped short by the pass is kept: its work counts in the
    // job's need, and dropped (spans of 1 ms or less were) the kept plan
    // fell short by it and the job lost its plan.
    if (s.end_seconds <= s.start_seconds || s.gpus == 0) continue;
    // A span at a count the job's curve no longer has (its maxGPUs lowered,
    // nodes excluded, another GPU type): planning it anew, not handing it a
    // size no layout runs.
    if (job.curve.FloorLevel(s.gpus) != s.gpus) return false;
    const size_t first = free.Split(s.start_seconds, at);
    const size_t last = free.Split(s.end_seconds, first);
    at = last;
    for (size_t i = first; i < last; ++i) {
      if (free.free(i) < s.gpus) return false;
    }
    work += (s.end_seconds - s.start_seconds) * job.curve.IterationsPerSecond(s.gpus);
    segments.push_back(s);
  }
  if (segments.empty()) return false;
  const int first = segments.front().gpus;
  const double need = NeededIterations(job, first, job.curve.IterationsPerSecond(first), options);
  if (work < need * (1 - 1e-9)) return false;
  at = 0;
  for (const PlanSegment& s : segments)
    at = free.Reserve(s.start_seconds, s.end_seconds, s.gpus, at);
  kept.feasible = true;
  kept.level = segments.back().gpus;
  kept.segments = std::move(segments);
  kept.finish_seconds = deadline;
  return true;
}

int GpusAt(const Reservation& reservation, double t) {
  for (const PlanSegment& s : reservation.segments) {
    if (s.start_seconds <= t + 1e-3 && t + 1e-3 < s.end_seconds) return s.gpus;
  }
  return 0;
}

int MostGpusWithin(const Reservation& reservation, double from, double to) {
  int most = 0;
  for (const PlanSegment& s : reservation.segments) {
    if (s.start_seconds <= to + 1e-3 && from < s.end_seconds) most = std::max(most, s.gpus);
  }
  return most;
}

int FewestGpusWithin(const Reservation& reservation, double from, double to) {
  int fewest = GpusAt(reservation, from);
  double covered = from;  // held without a gap up to here
  for (const PlanSegment& s : reservation.segments) {
    if (s.end_seconds <= from || s.start_seconds > to + 1e-3) continue;
    if (s.start_seconds > covered + 1e-3) return 0;  // a gap: it holds none then
    fewest = std::min(fewest, s.gpus);
    covered = std::max(covered, s.end_seconds);
  }
  return fewest;
}

}  // namespace pacer::sched
