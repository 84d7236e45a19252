// Deadline scheduling of many elastic jobs on one pool of identical GPUs:
// which new jobs to admit, and how many GPUs each job gets now.
//
// One pass, Schedule(), sees every unfinished job (remaining iterations,
// deadline, throughput curve, GPUs held now) and the pool size, and returns a
// decision per job. The caller (the simulator today, the controller's
// scheduler pass later) applies the decisions and calls again at the next
// arrival, completion, or `next_wakeup_seconds`, whichever comes first.
//
// Policies (docs/scheduling.md):
//  * kPacer: admission by minimum satisfactory share reserved as late as
//    possible, arrivals tested one by one; leftover GPUs by marginal return;
//    resizes only when the time they save pays for the restart (hysteresis).
//  * kEdf: no admission; earliest deadline first, each job the largest count
//    that is free (ElasticFlow's EDF baseline).
//  * kFifo: no admission, no resizing; in arrival order each waiting job starts
//    on the largest count that is free and keeps it to the end.
//
// Units: seconds on one clock chosen by the caller (`now_seconds`, arrivals and
// deadlines are absolute on it); iterations; GPUs.
// Deterministic and pure: no clock, no I/O. Thread-safety: Schedule() keeps no
// state and may run concurrently on different inputs.
#ifndef PACER_SCHED_SCHEDULER_H_
#define PACER_SCHED_SCHEDULER_H_

#include <optional>
#include <string>
#include <vector>

#include "pacer/sched/throughput_curve.h"
#include "pacer/status.h"

namespace pacer::sched {

enum class Policy { kPacer, kEdf, kFifo };

// "pacer", "edf", "fifo".
const char* PolicyName(Policy policy);
StatusOr<Policy> ParsePolicy(const std::string& name);

// What a checkpoint-and-relaunch costs (ElasticFlow's rescale model, see
// docs/scheduling.md). A relaunch on g GPUs stalls the job for
// RelaunchSeconds(g); a job kept as it is pays `keep_seconds` per scheduling
// event; every `restart_round_events`-th event every running job pays
// `restart_round_seconds` more.
struct RestartModel {
  double keep_seconds = 2;
  double per_doubling_seconds = 2;
  double restart_round_seconds = 27;
  int restart_round_events = 60;

  // keep_seconds + per_doubling_seconds * (log2(gpus) + 1).
  double RelaunchSeconds(int gpus) const;
  // The model ElasticFlow's simulator charges: 2 s / 27 s, or 7 s / 47 s on
  // clusters of 256 GPUs or more.
  static RestartModel ElasticFlow(int cluster_gpus);
  // No overhead at all (ElasticFlow's EDF baseline pays none).
  static RestartModel None();
};

// GPUs reserved for a job over [start, end).
struct ReservedSpan {
  double start_seconds = 0;
  double end_seconds = 0;
  int gpus = 0;
};

struct SchedJob {
  std::string id;
  double arrival_seconds = 0;              // orders arrivals (FIFO, ties)
  double remaining_iterations = 0;         // > 0
  std::optional<double> deadline_seconds;  // absent: best effort
  ThroughputCurve curve;
  int current_gpus = 0;   // GPUs it holds now (a level of `curve`, or 0)
  bool admitted = false;  // admitted by an earlier pass: never dropped
  // The reservation the previous pass returned (JobDecision::reservation);
  // kPacer keeps it while it still fits and covers the work.
  std::vector<ReservedSpan> reservation;
};

struct SchedOptions {
  Policy policy = Policy::kPacer;
  RestartModel restart;
  // A running job grows only if it then finishes at least this many restart
  // times earlier (kPacer).
  double hysteresis_factor = 2.0;
  // Work out Advice for rejected jobs (kPacer; costs a few extra passes).
  bool compute_advice = true;
  // Share of running time jobs lose to restarts, as measured so far (0..0.5):
  // plans stretch each job's work by 1 / (1 - fraction) so that the stalls
  // still to come do not make an admitted job late (kPacer).
  double overhead_fraction = 0;
  // Passes run at least this far apart (ElasticFlow's 60 s slot): every pass
  // costs every running job RestartModel::keep_seconds, so a pass per event
  // of a burst would stall all jobs. A pass gives each job what its plan
  // needs before the next pass (kPacer).
  double decision_interval_seconds = 60;
  // Plans also stretch work by this share of the worst-case stall rate the
  // restart model allows at one pass per interval (see StallHeadroom in
  // docs/scheduling.md); 0 trusts the measured overhead_fraction alone.
  double stall_headroom_factor = 0.5;
  // Plans finish this long before each deadline (kPacer), so that a
  // reservation made as late as possible survives a pass that runs a little
  // late. Only plans aim early: a job counts as late, and an arrival's
  // deadline as passed, at the deadline itself (a guard subtracted from the
  // deadlines made a job on time 50 s from its deadline "late", and the
  // policy gave its GPUs to a job that was waiting).
  double deadline_guard_seconds = 0;
};

// What would admit a rejected job, each alone with everything else unchanged.
struct Advice {
  std::optional<double> deadline_seconds;  // the earliest deadline admitted
  std::optional<double> iterations;        // the most iterations admitted
  std::optional<int> cluster_gpus;         // the smallest pool that admits it
};

enum class Admission { kAdmitted, kRejected };

struct JobDecision {
  std::string id;
  Admission admission = Admission::kAdmitted;
  int gpus = 0;        // to hold from now on (0 for rejected and waiting jobs)
  std::string reason;  // why rejected, in words
  Advice advice;
  // When the job finishes under the reserved plan (kPacer, deadline jobs).
  std::optional<double> planned_finish_seconds;
  // Its reserved GPUs over time (kPacer): pass it back in SchedJob.
  std::vector<ReservedSpan> reservation;
};

struct ScheduleResult {
  std::vector<JobDecision> decisions;  // one per input job, same order
  // Call again by then even if nothing arrives or finishes: a reservation
  // starts (kPacer).
  std::optional<double> next_wakeup_seconds;
};

// InvalidArgument for a job without positive remaining iterations, an empty
// curve, current allocations that exceed the pool, a time that is not a
// finite number (now, arrival, deadline, a reservation span's NaN end), a
// NaN overhead fraction, or a hysteresis, headroom or decision interval that
// is not a finite number >= 0.
StatusOr<ScheduleResult> Schedule(const std::vector<SchedJob>& jobs, int cluster_gpus,
                                  double now_seconds, const SchedOptions& options);

}  // namespace pacer::sched

#endif  // PACER_SCHED_SCHEDULER_H_
