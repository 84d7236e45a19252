// Reading a TrainJob object (the JSON the API server returns) for the
// reconciler: its spec through the planner's parser (one source of
// validation for the CLI and the controller), its identity and finalizers,
// and the controller's own bookkeeping kept in its status so that it
// survives a controller restart (the plan in force, launch attempt, re-plan
// and restart counts, the measured/predicted step-time ratio).
//
// Units: Unix seconds (`_unix_seconds`), steps.
// Thread-safety: pure functions.
#ifndef PACER_CONTROLLER_RECONCILE_JOB_OBJECT_H_
#define PACER_CONTROLLER_RECONCILE_JOB_OBJECT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "pacer/planner/calibration.h"
#include "pacer/planner/cost_model.h"
#include "pacer/planner/inventory.h"
#include "pacer/planner/job_spec.h"
#include "pacer/planner/layout.h"
#include "pacer/status.h"
#include "reconcile/interfaces.h"
#include "reconcile/worker_failure.h"

namespace pacer::controller {

// The job as the planner reads it. InvalidArgument naming the field and the
// fix, exactly as `pacer plan` reports it.
StatusOr<planner::JobSpec> ParseJobObject(const nlohmann::json& trainjob);

JobRef JobRefOf(const nlohmann::json& object);
bool HasFinalizer(const nlohmann::json& object, const std::string& finalizer);

// The reconciler's bookkeeping, in status fields next to the user-facing ones.
struct PersistedState {
  int attempt = 0;   // status.attempt: launches so far (pods carry it as a label)
  int replans = 0;   // status.replans
  int restarts = 0;  // status.restarts
  // status.failureCountedAttempt: the attempt whose worker failure was last
  // counted (restarts, the failure history). Written before that attempt's
  // pods are removed, so a removal that fails and is retried does not count
  // the same failure twice.
  int failure_counted_attempt = 0;
  // status.stoppedExternallyAttempt: the attempt whose pods were last seen
  // being deleted by someone other than the controller (a drain, an
  // eviction): reported once per attempt, and still told apart from the
  // controller's own stops on the passes that wait for the pods to go.
  int stopped_externally_attempt = 0;
  std::optional<int64_t> last_replan_unix_seconds;  // status.lastReplanTime
  int64_t plan_unix_seconds = 0;                    // status.launchTime
  std::optional<planner::Layout> layout;            // status.plan's layout fields
  // status.nextPlan: the layout a re-plan chose while its workers stop at a
  // checkpoint; the relaunch launches exactly it (RecheckLayout) and clears it.
  std::optional<planner::Layout> next_layout;
  planner::Calibration calibration;  // status.calibration
  int64_t steps_completed = 0;       // status.progress.stepsCompleted
  int64_t total_steps = 0;           // status.progress.totalSteps
  // status.stepUnit: the global batch and sequence length the steps of
  // status.progress were counted at (written at each launch). A job with
  // steps done refuses an edit of either (InvalidSpec StepUnitChanged):
  // checkpoints count optimizer steps, which would then mean other samples.
  struct StepUnit {
    int64_t global_batch_size = 0;
    int sequence_length = 0;
  };
  std::optional<StepUnit> step_unit;
  std::optional<double> measured_step_seconds;  // status.measuredStepSeconds
  // status.memoryMarginFraction, status.collectiveFailuresByNode,
  // status.excludedNodes: what worker failures taught (worker_failure.h).
  FailureHistory failures;
};

// Lenient: a field that is missing or malformed keeps its default.
PersistedState ReadPersistedState(const nlohmann::json& status);

// What of the step unit (state.step_unit) `spec` changes after steps were
// done, in words ("spec.training.globalBatchSize changed from 16 to 32");
// nullopt when nothing changed, no unit is recorded or no step was done.
std::optional<std::string> StepUnitChange(const PersistedState& state,
                                          const planner::JobSpec& spec);
// "<change> after N steps were trained at the old value: ..." (the caller
// adds the fix).
std::string StepUnitChangedMessage(const std::string& change, int64_t steps);
// Adds attempt, failureCountedAttempt, stoppedExternallyAttempt, launchTime,
// lastReplanTime, stepUnit, calibration, nextPlan and the
// failure history (memoryMarginFraction, collectiveFailuresByNode,
// excludedNodes), each only when set, to `status`.
void WritePersistedState(const PersistedState& state, nlohmann::ordered_json* status);

// status.projectedCompletionTime (Unix seconds), when it has one.
std::optional<int64_t> ProjectedCompletionOf(const nlohmann::json& status);

// The layout of a status.plan object (cli::PlanJson's field names); nullopt
// when a field is missing. The inverse of cli::LayoutJson.
std::optional<planner::Layout> LayoutFromPlanJson(const nlohmann::json& plan);

// Re-evaluates a layout in force for `job`: the pool comes from `inventory`
// (or, when it is gone, a pool of the layout's size with default network),
// the GPU from its catalog. nullopt when the GPU type is unknown.
std::optional<planner::Evaluation> EvaluateLayout(const planner::JobSpec& job,
                                                  const planner::Layout& layout,
                                                  const planner::Inventory& inventory,
                                                  const planner::Calibration& calibration,
                                                  const planner::ModelConstants& constants);

// Whether a layout chosen earlier can still be launched as it is for `job`
// (the remaining job, with its memory margin) on `inventory` (free GPUs now,
// excluded nodes already left out): its pool is there with enough free GPUs
// on enough nodes, the spec still allows its GPU type, GPU count and global
// batch, and it fits in memory. Its evaluation when so; FailedPrecondition
// saying what no longer holds when not.
StatusOr<planner::Evaluation> RecheckLayout(const planner::JobSpec& job,
                                            const planner::Layout& layout,
                                            const planner::Inventory& inventory,
                                            const planner::Calibration& calibration,
                                            const planner::ModelConstants& constants);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_RECONCILE_JOB_OBJECT_H_
