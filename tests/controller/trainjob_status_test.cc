// TrainJob status: condition helpers (transition times kept while the status
// holds), the status object's fields, and the plan object shared with
// `pacer plan -o json`.
#include "core/trainjob_status.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "cli/plan_output.h"

namespace pacer::controller {
namespace {

constexpr int64_t kNowUnixSeconds = 1795305600;  // 2026-11-22T00:00:00Z

Condition Make(const std::string& type, const std::string& status, const std::string& reason,
               const std::string& message = "") {
  Condition c;
  c.type = type;
  c.status = status;
  c.reason = reason;
  c.message = message;
  return c;
}

TEST(ConditionTest, SetAddsANewConditionAtNow) {
  std::vector<Condition> conditions;
  EXPECT_TRUE(SetCondition(&conditions, Make(kConditionPlanned, kConditionTrue, "Planned"),
                           kNowUnixSeconds));
  ASSERT_EQ(conditions.size(), 1u);
  EXPECT_EQ(conditions[0].last_transition_time, "2026-11-22T00:00:00Z");
  EXPECT_EQ(FindCondition(conditions, kConditionPlanned), &conditions[0]);
  EXPECT_EQ(FindCondition(conditions, kConditionRunning), nullptr);
}

TEST(ConditionTest, SameStatusKeepsTheTransitionTime) {
  std::vector<Condition> conditions;
  SetCondition(&conditions, Make(kConditionDeadlineAtRisk, kConditionTrue, "A", "first"),
               kNowUnixSeconds);
  // Same everything: no change.
  EXPECT_FALSE(SetCondition(&conditions,
                            Make(kConditionDeadlineAtRisk, kConditionTrue, "A", "first"),
                            kNowUnixSeconds + 60));
  // New reason and message, same status: updated, time kept.
  EXPECT_TRUE(SetCondition(&conditions,
                           Make(kConditionDeadlineAtRisk, kConditionTrue, "B", "second"),
                           kNowUnixSeconds + 120));
  EXPECT_EQ(conditions[0].reason, "B");
  EXPECT_EQ(conditions[0].message, "second");
  EXPECT_EQ(conditions[0].last_transition_time, "2026-11-22T00:00:00Z");
}

TEST(ConditionTest, StatusChangeMovesTheTransitionTime) {
  std::vector<Condition> conditions;
  SetCondition(&conditions, Make(kConditionDeadlineAtRisk, kConditionTrue, "A"), kNowUnixSeconds);
  EXPECT_TRUE(SetCondition(&conditions, Make(kConditionDeadlineAtRisk, kConditionFalse, "OnTrack"),
                           kNowUnixSeconds + 3600));
  ASSERT_EQ(conditions.size(), 1u);
  EXPECT_EQ(conditions[0].status, kConditionFalse);
  EXPECT_EQ(conditions[0].last_transition_time, "2026-11-22T01:00:00Z");
}

TEST(ConditionTest, RemoveCondition) {
  std::vector<Condition> conditions;
  SetCondition(&conditions, Make(kConditionPlanned, kConditionTrue, "Planned"), kNowUnixSeconds);
  SetCondition(&conditions, Make(kConditionRunning, kConditionTrue, "Running"), kNowUnixSeconds);
  EXPECT_TRUE(RemoveCondition(&conditions, kConditionPlanned));
  EXPECT_FALSE(RemoveCondition(&conditions, kConditionPlanned));
  ASSERT_EQ(conditions.size(), 1u);
  EXPECT_EQ(conditions[0].type, kConditionRunning);
}

TEST(ConditionTest, JsonRoundTrip) {
  std::vector<Condition> conditions;
  Condition c = Make(kConditionDegraded, kConditionTrue, "WorkerRestarted", "rank 3 exited 4");
  c.observed_generation = 7;
  SetCondition(&conditions, c, kNowUnixSeconds);
  SetCondition(&conditions, Make(kConditionRunning, kConditionFalse, "Pending"), kNowUnixSeconds);
  const StatusJson json = ConditionsJson(conditions);
  EXPECT_EQ(json[0]["lastTransitionTime"], "2026-11-22T00:00:00Z");
  EXPECT_EQ(json[0]["observedGeneration"], 7);
  nlohmann::json status;
  status["conditions"] = nlohmann::json::parse(json.dump());
  EXPECT_EQ(ParseConditions(status), conditions);
  EXPECT_TRUE(ParseConditions(nlohmann::json()).empty());
}

// A condition quoting server text whole (a webhook's denial, a Prometheus
// error) past the CRD's maxLength made the API server refuse every status
// write of the job: the message is cut to it, never inside a UTF-8 sequence.
TEST(ConditionTest, AMessageIsCutToTheCrdsMaxLength) {
  std::vector<Condition> conditions;
  const std::string denial = "denied: " + std::string(kMaxConditionMessageBytes, 'x');
  SetCondition(&conditions, Make(kConditionDegraded, kConditionTrue, "LaunchRefused", denial),
               kNowUnixSeconds);
  // Two-byte characters from an odd offset: the cut falls inside one.
  const std::string accents = "x" + [] {
    std::string s;
    for (std::size_t i = 0; i < kMaxConditionMessageBytes; ++i) s += "\xc3\xa9";
    return s;
  }();
  SetCondition(&conditions, Make(kConditionRunning, kConditionFalse, "Pending", accents),
               kNowUnixSeconds);
  const StatusJson json = ConditionsJson(conditions);
  const std::string cut = json[0]["message"].get<std::string>();
  EXPECT_EQ(cut.size(), kMaxConditionMessageBytes);
  EXPECT_TRUE(cut == denial.substr(0, kMaxConditionMessageBytes)) << "not the message's start";
  const std::string cut_accents = json[1]["message"].get<std::string>();
  EXPECT_EQ(cut_accents.size(), kMaxConditionMessageBytes - 1);
  EXPECT_NO_THROW((void)nlohmann::json(cut_accents).dump()) << "not UTF-8";
}

planner::Evaluation SamplePlan() {
  planner::Evaluation e;
  e.layout.pool = "h100-sxm-8gpu";
  e.layout.gpu_type = "H100-SXM";
  e.layout.nodes = 8;
  e.layout.gpus_per_node = 8;
  e.layout.tensor_parallel = 2;
  e.layout.data_parallel = 32;
  e.layout.zero_stage = 1;
  e.layout.micro_batch_size = 4;
  e.layout.gradient_accumulation_steps = 8;
  e.step.step_seconds = 7.9;
  e.total.total_seconds = 86400;
  e.memory.weights_bytes = 61.2 * 1024 * 1024 * 1024;
  return e;
}

TEST(TrainJobStatusTest, BuildsEveryField) {
  StatusInputs in;
  in.phase = Phase::kRunning;
  in.conditions = {Make(kConditionPlanned, kConditionTrue, "Planned"),
                   Make(kConditionRunning, kConditionTrue, "WorkersRunning"),
                   Make(kConditionDeadlineAtRisk, kConditionFalse, "OnTrack")};
  in.plan = SamplePlan();
  in.plan_unix_seconds = kNowUnixSeconds - 3600;
  in.steps_completed = 1200;
  in.total_steps = 238419;
  in.measured_step_seconds = 8.3;
  in.projected_completion_unix_seconds = kNowUnixSeconds + 86400;
  in.deadline_slack_seconds = 41230.7;
  in.replans = 1;
  in.observed_generation = 3;
  const StatusJson s = BuildTrainJobStatus(in, nlohmann::json(), kNowUnixSeconds);
  EXPECT_EQ(s["phase"], "Running");
  EXPECT_EQ(s["observedGeneration"], 3);
  ASSERT_EQ(s["conditions"].size(), 3u);
  EXPECT_EQ(s["conditions"][2]["type"], "DeadlineAtRisk");
  EXPECT_EQ(s["conditions"][2]["status"], "False");
  // The CLI's plan JSON, less its null fields: no price, no "cost" key (not
  // null, which `kubectl describe` prints as "Cost: <nil>").
  auto expected_plan = cli::PlanJson(*in.plan, kNowUnixSeconds - 3600);
  ASSERT_TRUE(expected_plan.contains("cost"));
  expected_plan.erase("cost");
  EXPECT_EQ(s["plan"], expected_plan);
  EXPECT_FALSE(s["plan"].contains("cost"));
  EXPECT_EQ(s["plan"]["gpuType"], "H100-SXM");
  EXPECT_EQ(s["plan"]["predictedStepSeconds"], 7.9);
  EXPECT_EQ(s["plan"]["predictedCompletionTime"], "2026-11-22T23:00:00Z");
  EXPECT_EQ(s["progress"]["stepsCompleted"], 1200);
  EXPECT_EQ(s["progress"]["totalSteps"], 238419);
  EXPECT_EQ(s["progress"]["percent"], 0.5);
  EXPECT_EQ(s["measuredStepSeconds"], 8.3);
  EXPECT_EQ(s["projectedCompletionTime"], "2026-11-23T00:00:00Z");
  EXPECT_EQ(s["deadlineSlackSeconds"], 41230);
  EXPECT_EQ(s["deadlineSlack"], "+11h27m");  // the SLACK column
  EXPECT_EQ(s["replans"], 1);
  EXPECT_EQ(s["restarts"], 0);
}

// A slack beyond int64 (from an absurd measured step time) is written as
// the clamp's million years, not as whatever the conversion made of it.
TEST(TrainJobStatusTest, AnAbsurdSlackIsClampedNotConvertedOutOfRange) {
  const int64_t million_years = static_cast<int64_t>(1e6 * 365.25 * 86400);
  for (double slack : {-1e300, -std::numeric_limits<double>::infinity()}) {
    StatusInputs in;
    in.phase = Phase::kRunning;
    in.deadline_slack_seconds = slack;
    const StatusJson s = BuildTrainJobStatus(in, nlohmann::json::object(), kNowUnixSeconds);
    EXPECT_EQ(s["deadlineSlackSeconds"], -million_years) << slack;
    EXPECT_EQ(s["deadlineSlack"].get<std::string>().front(), '-') << slack;
  }
}

TEST(TrainJobStatusTest, OmitsWhatIsUnknown) {
  StatusInputs in;
  in.phase = Phase::kPending;
  const StatusJson s = BuildTrainJobStatus(in, nlohmann::json::object(), kNowUnixSeconds);
  EXPECT_EQ(s["phase"], "Pending");
  EXPECT_TRUE(s["conditions"].empty());
  for (const char* key : {"plan", "progress", "measuredStepSeconds", "projectedCompletionTime",
                          "deadlineSlackSeconds", "deadlineSlack", "observedGeneration"}) {
    EXPECT_FALSE(s.contains(key)) << key;
  }
}

TEST(TrainJobStatusTest, CarriesTransitionTimesOverAndDropsStaleConditions) {
  const auto previous = nlohmann::json::parse(R"({
    "phase": "Running",
    "conditions": [
      {"type": "Running", "status": "True", "reason": "WorkersRunning", "message": "",
       "lastTransitionTime": "2026-11-20T10:00:00Z"},
      {"type": "DeadlineAtRisk", "status": "False", "reason": "OnTrack", "message": "",
       "lastTransitionTime": "2026-11-20T10:00:00Z"},
      {"type": "Replanning", "status": "True", "reason": "SlowerThanPredicted", "message": "",
       "lastTransitionTime": "2026-11-21T10:00:00Z"}]})");
  StatusInputs in;
  in.phase = Phase::kRunning;
  in.conditions = {Make(kConditionRunning, kConditionTrue, "WorkersRunning"),
                   Make(kConditionDeadlineAtRisk, kConditionTrue, "SlowerThanPredicted", "late")};
  const StatusJson s = BuildTrainJobStatus(in, previous, kNowUnixSeconds);
  ASSERT_EQ(s["conditions"].size(), 2u);
  EXPECT_EQ(s["conditions"][0]["lastTransitionTime"], "2026-11-20T10:00:00Z");  // unchanged
  EXPECT_EQ(s["conditions"][1]["lastTransitionTime"], "2026-11-22T00:00:00Z");  // flipped
  EXPECT_EQ(s["conditions"][1]["reason"], "SlowerThanPredicted");
}

TEST(TrainJobStatusTest, AConditionListedTwiceAppearsOnce) {
  StatusInputs in;
  in.conditions = {Make(kConditionRunning, kConditionFalse, "WorkersPending"),
                   Make(kConditionRunning, kConditionTrue, "WorkersRunning")};
  const StatusJson s = BuildTrainJobStatus(in, nlohmann::json(), kNowUnixSeconds);
  ASSERT_EQ(s["conditions"].size(), 1u);
  EXPECT_EQ(s["conditions"][0]["reason"], "WorkersRunning");
}

TEST(TrainJobStatusTest, PhaseNames) {
  EXPECT_STREQ(PhaseName(Phase::kPlanning), "Planning");
  EXPECT_STREQ(PhaseName(Phase::kReplanning), "Replanning");
  EXPECT_STREQ(PhaseName(Phase::kSucceeded), "Succeeded");
  EXPECT_STREQ(PhaseName(Phase::kFailed), "Failed");
  EXPECT_STREQ(PhaseName(Phase::kInfeasible), "Infeasible");
}

}  // namespace
}  // namespace pacer::controller
