// The TrainJob's `status`: builds the status object the reconciler writes
// through the /status subresource from what it observed on this pass, and the
// condition helpers (Kubernetes API conventions: one condition per type,
// lastTransitionTime changes only when the condition's status does).
// Field reference: docs/controller.md ("Status and conditions"). The `plan`
// object is the one `pacer plan -o json` prints (cli::PlanJson, the single
// source of its field names).
//
// Units: seconds (`...Seconds`), RFC 3339 UTC strings (`...Time`), percent
// (0..100) for progress.percent; inputs in Unix seconds (`_unix_seconds`).
// Thread-safety: pure functions and plain value types.
#ifndef PACER_CONTROLLER_CORE_TRAINJOB_STATUS_H_
#define PACER_CONTROLLER_CORE_TRAINJOB_STATUS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pacer/planner/cost_model.h"

namespace pacer::controller {

// Keys keep the order in which they are written (as the CLI's output does).
using StatusJson = nlohmann::ordered_json;

enum class Phase { kPending, kPlanning, kRunning, kReplanning, kSucceeded, kFailed, kInfeasible };
const char* PhaseName(Phase phase);  // "Pending", "Planning", ...

// Condition types.
inline constexpr const char* kConditionPlanned = "Planned";
inline constexpr const char* kConditionRunning = "Running";
inline constexpr const char* kConditionDeadlineAtRisk = "DeadlineAtRisk";
inline constexpr const char* kConditionInfeasible = "Infeasible";
inline constexpr const char* kConditionDegraded = "Degraded";
inline constexpr const char* kConditionReplanning = "Replanning";
inline constexpr const char* kConditionSucceeded = "Succeeded";
inline constexpr const char* kConditionFailed = "Failed";

// Degraded's reason while the job's metrics cannot be read: the reconciler
// writes it, the cluster scheduler reads it (progress is stale meanwhile).
inline constexpr const char* kReasonMetricsUnavailable = "MetricsUnavailable";

// The CRD's maxLength for a condition's message: a longer one (a webhook's
// denial or a Prometheus error quoted whole) made the API server refuse
// every status write of the job. ConditionsJson cuts messages to it.
inline constexpr std::size_t kMaxConditionMessageBytes = 32768;

inline constexpr const char* kConditionTrue = "True";
inline constexpr const char* kConditionFalse = "False";
inline constexpr const char* kConditionUnknown = "Unknown";

struct Condition {
  std::string type;
  std::string status = kConditionUnknown;  // "True", "False" or "Unknown"
  std::string reason;                      // CamelCase, e.g. "SlowerThanPredicted"
  std::string message;
  std::string last_transition_time;  // RFC 3339; set by SetCondition
  std::optional<int64_t> observed_generation;

  friend bool operator==(const Condition&, const Condition&) = default;
};

// The condition of `type`, or nullptr.
const Condition* FindCondition(const std::vector<Condition>& conditions, std::string_view type);

// Adds or updates the condition of `condition.type`. lastTransitionTime
// becomes `now_unix_seconds` when the condition is new or its status changed,
// and is kept otherwise (reason and message are updated in place). Returns
// whether anything changed.
bool SetCondition(std::vector<Condition>* conditions, Condition condition,
                  int64_t now_unix_seconds);

// Removes the condition of `type`; returns whether there was one.
bool RemoveCondition(std::vector<Condition>* conditions, std::string_view type);

// status.conditions of an object read from the API server (lenient: entries
// without a type are skipped); an empty list when absent.
std::vector<Condition> ParseConditions(const nlohmann::json& status);
StatusJson ConditionsJson(const std::vector<Condition>& conditions);

// What the reconciler observed on this pass.
struct StatusInputs {
  Phase phase = Phase::kPending;
  // The conditions that hold now, in the order to write them. Conditions of
  // the previous status that are not listed are dropped (the status is rebuilt
  // from the world on every pass); transition times are carried over.
  std::vector<Condition> conditions;
  std::optional<planner::Evaluation> plan;  // the plan in force
  int64_t plan_unix_seconds = 0;            // when it was made (its predictedCompletionTime)
  int64_t steps_completed = 0;
  int64_t total_steps = 0;  // 0 = unknown: no progress object
  std::optional<double> measured_step_seconds;
  std::optional<int64_t> projected_completion_unix_seconds;
  std::optional<double> deadline_slack_seconds;  // deadline - projected completion
  int replans = 0;
  int restarts = 0;
  std::optional<int64_t> observed_generation;  // metadata.generation acted on
};

// The status object: phase, observedGeneration, conditions, plan, progress
// {stepsCompleted, totalSteps, percent}, measuredStepSeconds,
// projectedCompletionTime, deadlineSlackSeconds, replans, restarts. Optional
// inputs that are absent are omitted. `previous_status` is the object's
// current status (null or {} when none).
StatusJson BuildTrainJobStatus(const StatusInputs& inputs, const nlohmann::json& previous_status,
                               int64_t now_unix_seconds);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_CORE_TRAINJOB_STATUS_H_
