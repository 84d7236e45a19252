// Replays a trace of jobs through Schedule() on a simulated clock.
//
// Event driven: the clock jumps from one decision to the next (an arrival, a
// completion, or a reservation starting), so a two-month trace takes
// thousands of steps, not millions. Between decisions a job on g GPUs
// progresses at T(g) iterations/s after it has paid its restart overhead
// (RestartModel, charged at every decision as ElasticFlow's simulator does).
// A job meets its deadline when its last iteration ends by the deadline;
// rejected jobs count as misses.
// Units: seconds (the trace's clock), iterations, GPUs.
// Deterministic and pure. Thread-safety: Simulate() keeps no state.
#ifndef PACER_SCHED_SIMULATOR_H_
#define PACER_SCHED_SIMULATOR_H_

#include <optional>
#include <string>
#include <vector>

#include "pacer/sched/scheduler.h"
#include "pacer/status.h"

namespace pacer::sched {

struct SimJob {
  std::string id;
  double arrival_seconds = 0;
  double iterations = 0;
  std::optional<double> deadline_seconds;  // absent: best effort
  ThroughputCurve curve;
};

struct SimOptions {
  int cluster_gpus = 0;
  // Policy, restart model, hysteresis, and the decision interval: an
  // arrival or completion closer than sched.decision_interval_seconds to the
  // last decision waits for the next one.
  SchedOptions sched;
};

// One job's GPUs over [start, end).
struct AllocationSpan {
  size_t job = 0;  // index into the input
  double start_seconds = 0;
  double end_seconds = 0;
  int gpus = 0;
};

struct JobOutcome {
  std::string id;
  bool admitted = true;
  bool finished = false;
  std::optional<double> finish_seconds;
  bool met_deadline = false;
  int resizes = 0;
  double stalled_seconds = 0;  // lost to restart overhead
  std::string reject_reason;
};

struct SimResult {
  std::vector<JobOutcome> outcomes;   // input order
  std::vector<AllocationSpan> spans;  // by start time
  int jobs_with_deadline = 0;
  int met_deadline = 0;
  int admitted = 0;
  int rejected = 0;
  int admitted_missed = 0;   // admitted deadline jobs that finished late
  int resizes = 0;           // a running job's GPU count changed
  int decisions = 0;         // scheduling events
  double start_seconds = 0;  // first arrival
  double end_seconds = 0;    // last completion
  double gpu_seconds_used = 0;
  // met_deadline / jobs_with_deadline (1 when no job has a deadline).
  double deadline_ratio() const;
  // gpu_seconds_used / (cluster GPUs x (end - start)).
  double utilisation = 0;
};

// InvalidArgument for an empty trace, a pool without GPUs, or a job whose
// curve's smallest level exceeds the pool.
StatusOr<SimResult> Simulate(const std::vector<SimJob>& jobs, const SimOptions& options);

}  // namespace pacer::sched

#endif  // PACER_SCHED_SIMULATOR_H_
