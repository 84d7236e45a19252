// The re-plan policy: given a running job's progress and measured step time,
// is its deadline at risk, and would a new plan on the GPUs available now
// finish enough sooner to be worth a relaunch? Pure: no clocks, no network;
// the reconciler passes in `now`, the measurement (from Prometheus) and the
// inventory, and acts on the Decision. Formulas and defaults are in
// docs/controller.md ("Re-plan policy").
//
//   remaining_steps      = total_steps - completed_steps
//   step_seconds         = measured, or the plan's prediction when unmeasured
//   overhead_per_step    = the plan's (checkpoint writes + expected failure
//                          rework) / its optimizer steps
//   projected_completion = now + remaining_steps x (step_seconds + overhead_per_step)
//   at_risk              = projected_completion > deadline - slack x (deadline - now)
//
// Only an at-risk job is re-planned (so a faster-than-predicted measurement
// never causes churn), at most once per `min_interval_seconds`, and only when
// the new plan's completion (the planner's total for the remaining steps,
// startup included) is earlier than the current projection by more than
// max(min_improvement_fraction x (projection - now), min_improvement_seconds).
//
// Units: times in Unix seconds (`_unix_seconds`, UTC) or seconds (`_seconds`).
// Thread-safety: pure; DecideReplan may run concurrently on different inputs.
#ifndef PACER_CONTROLLER_CORE_REPLAN_POLICY_H_
#define PACER_CONTROLLER_CORE_REPLAN_POLICY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "pacer/planner/calibration.h"
#include "pacer/planner/cost_model.h"
#include "pacer/planner/inventory.h"
#include "pacer/planner/job_spec.h"
#include "pacer/status.h"

namespace pacer::controller {

struct ReplanOptions {
  // A relaunch must gain more than the larger of these two.
  double min_improvement_fraction = 0.10;  // of the remaining time
  double min_improvement_seconds = 600;
  // Hysteresis: at least this long between two re-plans.
  double min_interval_seconds = 600;
  // The planner's constants (startup time, failure model, ...).
  planner::ModelConstants constants;
};

struct ReplanInputs {
  // The job as parsed; its training, model, resources, objective and
  // replan.enabled are used. Its data and deadline fields are not: the policy
  // plans the remaining steps against `deadline_unix_seconds`.
  planner::JobSpec job;
  // planner::EffectiveDeadline(job, now); a job without one is never at risk.
  std::optional<int64_t> deadline_unix_seconds;
  double slack_fraction = 0.05;  // spec.replan.slack, [0, 1)
  int64_t now_unix_seconds = 0;
  int64_t total_steps = 0;      // > 0
  int64_t completed_steps = 0;  // 0..total_steps
  // Mean seconds per optimizer step from Prometheus; nullopt when there is no
  // measurement yet (or the workers run a scaled model).
  std::optional<double> measured_step_seconds;
  // The plan in force (its layout and predicted step time).
  planner::Evaluation current_plan;
  // The cluster now. Free GPUs exclude the job's own: the policy adds the
  // current plan's GPUs back to its pool before planning.
  planner::Inventory inventory;
  // Calibration the job was planned with (may be empty); the policy sets the
  // plan's GPU type's stepTimeRatio from the measurement.
  planner::Calibration calibration;
  std::optional<int64_t> last_replan_unix_seconds;
};

struct Decision {
  enum class Action {
    kKeep,        // keep the plan in force
    kReplan,      // relaunch with new_plan
    kInfeasible,  // no plan on this cluster meets the deadline, whatever is freed
  };
  Action action = Action::kKeep;
  // A CamelCase reason for conditions and events ("OnTrack",
  // "SlowerThanPredicted", "ReplanHysteresis", "InsufficientGpus", ...) and a
  // one-line message for humans.
  std::string reason;
  std::string message;
  bool at_risk = false;
  int64_t projected_completion_unix_seconds = 0;  // with the plan in force
  double slack_seconds = 0;                       // deadline - projected completion
  double step_seconds_used = 0;                   // measured, or predicted
  std::optional<double> step_time_ratio;          // measured / uncalibrated predicted
  // The planner's best plan for the remaining steps, when it was consulted;
  // the plan to launch when action == kReplan.
  std::optional<planner::Evaluation> new_plan;
  std::optional<int64_t> new_projected_completion_unix_seconds;
};

// The job reduced to its remaining steps (data = remaining x global batch
// sequences, one epoch), due at `deadline_unix_seconds` (maxDuration
// dropped). Relaunches plan this, so a restarted or re-planned job is sized
// for the work left, not the whole run.
planner::JobSpec RemainingJob(const planner::JobSpec& job, int64_t remaining_steps,
                              int64_t deadline_unix_seconds);

const char* ActionName(Decision::Action action);  // "Keep", "Replan", "Infeasible"

// When `remaining_steps` more steps of `step_seconds` finish from `now`,
// each with its share of `plan`'s checkpoint writes and expected failure
// rework (Unix seconds, fractional). The one projection of the status ETA
// and the re-plan policy.
double ProjectCompletion(double now_unix_seconds, int64_t remaining_steps, double step_seconds,
                         const planner::Evaluation& plan);

// The ratio of a measured step time to `plan`'s raw prediction (its step
// time without the calibration ratio it was planned with): the
// stepTimeRatio a plan on the same GPU type is calibrated with.
double StepTimeRatio(double measured_step_seconds, const planner::Evaluation& plan);

// The at-risk threshold: `deadline - slack_fraction x max(0, deadline -
// now)` (Unix seconds, fractional). A projection past it is at risk; the
// launch and every re-plan plan to finish by it.
double AtRiskThreshold(double deadline_unix_seconds, double now_unix_seconds,
                       double slack_fraction);

// Errors: InvalidArgument for inconsistent inputs (no steps, completed >
// total, a non-positive step time or slack outside [0, 1)). Planner failures
// are not errors: the decision keeps the plan in force and says why.
StatusOr<Decision> DecideReplan(const ReplanInputs& inputs, const ReplanOptions& options = {});

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_CORE_REPLAN_POLICY_H_
