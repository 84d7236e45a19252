#include "core/trainjob_status.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "cli/format.h"
#include "cli/plan_output.h"
#include "core/utf8_prefix.h"
#include "pacer/planner/units.h"

namespace pacer::controller {

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kPending:
      return "Pending";
    case Phase::kPlanning:
      return "Planning";
    case Phase::kRunning:
      return "Running";
    case Phase::kReplanning:
      return "Replanning";
    case Phase::kSucceeded:
      return "Succeeded";
    case Phase::kFailed:
      return "Failed";
    case Phase::kInfeasible:
      return "Infeasible";
  }
  return "Pending";
}

const Condition* FindCondition(const std::vector<Condition>& conditions, std::string_view type) {
  for (const Condition& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

bool SetCondition(std::vector<Condition>* conditions, Condition condition,
                  int64_t now_unix_seconds) {
  auto it = std::find_if(conditions->begin(), conditions->end(),
                         [&](const Condition& c) { return c.type == condition.type; });
  if (it == conditions->end()) {
    condition.last_transition_time = planner::FormatRfc3339(now_unix_seconds);
    conditions->push_back(std::move(condition));
    return true;
  }
  if (it->status != condition.status || it->last_transition_time.empty()) {
    condition.last_transition_time = planner::FormatRfc3339(now_unix_seconds);
  } else {
    condition.last_transition_time = it->last_transition_time;
  }
  if (*it == condition) return false;
  *it = std::move(condition);
  return true;
}

bool RemoveCondition(std::vector<Condition>* conditions, std::string_view type) {
  const auto size = conditions->size();
  std::erase_if(*conditions, [&](const Condition& c) { return c.type == type; });
  return conditions->size() != size;
}

std::vector<Condition> ParseConditions(const nlohmann::json& status) {
  std::vector<Condition> result;
  if (!status.is_object()) return result;
  auto list = status.find("conditions");
  if (list == status.end() || !list->is_array()) return result;
  auto text = [](const nlohmann::json& obj, const char* key) {
    auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  for (const nlohmann::json& c : *list) {
    if (!c.is_object() || text(c, "type").empty()) continue;
    Condition condition;
    condition.type = text(c, "type");
    condition.status = text(c, "status");
    condition.reason = text(c, "reason");
    condition.message = text(c, "message");
    condition.last_transition_time = text(c, "lastTransitionTime");
    if (auto g = c.find("observedGeneration"); g != c.end() && g->is_number_integer()) {
      condition.observed_generation = g->get<int64_t>();
    }
    result.push_back(std::move(condition));
  }
  return result;
}

StatusJson ConditionsJson(const std::vector<Condition>& conditions) {
  StatusJson list = StatusJson::array();
  for (const Condition& c : conditions) {
    StatusJson json;
    json["type"] = c.type;
    json["status"] = c.status;
    if (c.observed_generation) json["observedGeneration"] = *c.observed_generation;
    json["lastTransitionTime"] = c.last_transition_time;
    json["reason"] = c.reason;
    json["message"] = Utf8Prefix(c.message, kMaxConditionMessageBytes);
    list.push_back(std::move(json));
  }
  return list;
}

StatusJson BuildTrainJobStatus(const StatusInputs& in, const nlohmann::json& previous_status,
                               int64_t now_unix_seconds) {
  // Start from the previous conditions so that unchanged ones keep their
  // transition times, then keep only (and in the order of) the current ones.
  std::vector<Condition> merged = ParseConditions(previous_status);
  std::vector<Condition> conditions;
  for (const Condition& wanted : in.conditions) {
    SetCondition(&merged, wanted, now_unix_seconds);
    const Condition& set = *FindCondition(merged, wanted.type);
    auto listed = std::find_if(conditions.begin(), conditions.end(),
                               [&](const Condition& c) { return c.type == wanted.type; });
    if (listed != conditions.end()) {
      *listed = set;  // listed twice: the last one wins
    } else {
      conditions.push_back(set);
    }
  }

  StatusJson status;
  status["phase"] = PhaseName(in.phase);
  if (in.observed_generation) status["observedGeneration"] = *in.observed_generation;
  status["conditions"] = ConditionsJson(conditions);
  if (in.plan) {
    status["plan"] = cli::PlanJson(*in.plan, in.plan_unix_seconds);
    // An unknown field is left out, not written as null: `kubectl describe`
    // would print "Cost: <nil>" for node pools without a price.
    for (auto it = status["plan"].begin(); it != status["plan"].end();) {
      it = it->is_null() ? status["plan"].erase(it) : std::next(it);
    }
  }
  if (in.total_steps > 0) {
    const double percent =
        100.0 * static_cast<double>(in.steps_completed) / static_cast<double>(in.total_steps);
    status["progress"] = {{"stepsCompleted", in.steps_completed},
                          {"totalSteps", in.total_steps},
                          {"percent", std::round(percent * 100) / 100}};
  }
  if (in.measured_step_seconds) {
    status["measuredStepSeconds"] = cli::RoundSignificant(*in.measured_step_seconds);
  }
  if (in.projected_completion_unix_seconds) {
    status["projectedCompletionTime"] =
        planner::FormatRfc3339(*in.projected_completion_unix_seconds);
  }
  if (in.deadline_slack_seconds) {
    // Differences of clamped times (CeilUnixSeconds) fit; the clamp keeps
    // any other double from converting out of int64's range.
    const int64_t slack_seconds = planner::FloorUnixSeconds(*in.deadline_slack_seconds);
    status["deadlineSlackSeconds"] = slack_seconds;
    // The same, for people (the SLACK column): "+11h27m", "-3m10s".
    status["deadlineSlack"] = cli::FormatSignedDuration(static_cast<double>(slack_seconds));
  }
  status["replans"] = in.replans;
  status["restarts"] = in.restarts;
  return status;
}

}  // namespace pacer::controller
