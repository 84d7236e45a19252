// Minimum satisfactory share: the fewest GPUs (a curve level) with which a
// job still finishes by its deadline, reserved as late as possible on the
// free timeline so that early capacity stays free for jobs yet to arrive.
// Internal to the scheduler (docs/scheduling.md, "Admission").
// Units: seconds, iterations, GPUs. Thread-safety: pure except `free`.
#ifndef PACER_SCHED_MIN_SHARE_H_
#define PACER_SCHED_MIN_SHARE_H_

#include <vector>

#include "free_timeline.h"
#include "pacer/sched/scheduler.h"

namespace pacer::sched {

using PlanSegment = ReservedSpan;

struct Reservation {
  bool feasible = false;
  int level = 0;                      // the share: GPUs the plan asks for where they are free
  std::vector<PlanSegment> segments;  // ascending, within [now, deadline)
  double finish_seconds = 0;          // the deadline when feasible
};

// The share of running time the restart model can take from a job that keeps
// its size while passes come every decision interval (a keep charge per pass
// plus the restart rounds), times options.stall_headroom_factor.
double StallHeadroom(const SchedOptions& options);

// The iterations a plan of `job` at `level` GPUs (of `iterations_per_second`)
// must fit before the deadline: its remaining work stretched by
// 1 / (1 - f), f the larger of options.overhead_fraction and
// StallHeadroom(options) (clamped to [0, 0.5]), plus one relaunch at that
// rate when `level` is not the job's current GPUs.
double NeededIterations(const SchedJob& job, int level, double iterations_per_second,
                        const SchedOptions& options);

// Plans `job` (which must have a deadline) on `free` and reserves the plan
// there. When no level reaches the deadline, returns feasible = false and,
// with `reserve_if_infeasible`, reserves the most it can get before the
// deadline. A plan on a level other than the job's current GPUs includes one
// relaunch.
// The work is NeededIterations at the plan's level.
Reservation ReserveMinShare(const SchedJob& job, double now_seconds, const SchedOptions& options,
                            bool reserve_if_infeasible, FreeTimeline& free);

// Re-reserves the job's reservation from the previous pass (job.reservation,
// clipped to now) when it still fits `free` and still covers the remaining
// work (stretched as in ReserveMinShare). Keeping reservations from pass to
// pass keeps admitted jobs feasible: re-planning from scratch can reshape an
// earlier-deadline job into slots a later one relied on.
bool KeepReservation(const SchedJob& job, double now_seconds, const SchedOptions& options,
                     FreeTimeline& free, Reservation& kept);

// GPUs the reservation holds at `t` (0 outside its segments).
int GpusAt(const Reservation& reservation, double t);

// The most GPUs the reservation holds at any time in [from, to] (0 when
// none): what a pass must give the job to carry it to the next pass.
int MostGpusWithin(const Reservation& reservation, double from, double to);

// The fewest GPUs the reservation holds at any time in [from, to] while it
// runs (0 for a gap between its segments; none after its last, when the
// job is done): what a pass can cut the job to when plans ask for more
// than the pool.
int FewestGpusWithin(const Reservation& reservation, double from, double to);

}  // namespace pacer::sched

#endif  // PACER_SCHED_MIN_SHARE_H_
