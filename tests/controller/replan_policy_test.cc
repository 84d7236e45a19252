// The re-plan policy on a Llama-2-7B job planned on an H100 pool: slower than
// predicted (re-plan with more GPUs, same global batch), faster (keep), gains
// within the margin (keep), hysteresis, no free GPUs (advice), no
// measurement (the prediction), and an unreachable deadline.
#include "core/replan_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "pacer/planner/job_parser.h"
#include "pacer/planner/search.h"

namespace pacer::controller {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

constexpr int64_t kNow = 1795305600;  // 2026-11-22T00:00:00Z
constexpr int kNodes = 16;

planner::JobSpec Llama7b() {
  auto job = planner::ParseTrainJob(
      "apiVersion: pacer.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: llama}\nspec:\n"
      "  model: {layers: 32, hiddenSize: 4096, attentionHeads: 32, ffnHiddenSize: 11008,\n"
      "          ffnKind: swiglu, vocabSize: 32000, sequenceLength: 4096}\n"
      "  data: {tokens: 100B}\n"
      "  training: {globalBatchSize: 1024}\n"
      "  resources: {gpuTypes: [H100-SXM]}\n");
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? *job : planner::JobSpec{};
}

planner::Inventory H100Pool(int nodes, int free_gpus) {
  planner::Inventory inventory;
  inventory.node_pools.push_back({"h100", "H100-SXM", nodes, 8, free_gpus, 3200, 0, 2.5});
  return inventory;
}

// A running job: planned on 2 free nodes, 10% done.
struct Scenario {
  ReplanInputs inputs;
  // R: remaining steps at the plan's pace (its total less start-up, per step:
  // the step and its share of checkpoint writes and failure rework).
  double remaining_predicted_seconds = 0;
};

Scenario Running() {
  Scenario s;
  planner::JobSpec job = Llama7b();
  planner::PlanOptions options;
  options.now_unix_seconds = kNow;
  auto initial = planner::Plan(job, H100Pool(kNodes, 16), {}, options);
  EXPECT_TRUE(initial.ok()) << initial.status().ToString();
  if (!initial.ok() || !initial->plan) return s;
  ReplanInputs& in = s.inputs;
  in.job = job;
  in.current_plan = *initial->plan;
  in.total_steps = in.current_plan.total.optimizer_steps;
  in.completed_steps = in.total_steps / 10;
  in.now_unix_seconds = kNow;
  in.slack_fraction = 0.05;
  const planner::TotalTimeBreakdown& total = in.current_plan.total;
  s.remaining_predicted_seconds = static_cast<double>(in.total_steps - in.completed_steps) *
                                  (total.total_seconds - total.startup_seconds) /
                                  static_cast<double>(total.optimizer_steps);
  in.deadline_unix_seconds = kNow + static_cast<int64_t>(1.25 * s.remaining_predicted_seconds);
  // Everything but the job's own GPUs is free.
  in.inventory = H100Pool(kNodes, kNodes * 8 - in.current_plan.layout.gpus());
  return s;
}

TEST(ReplanPolicyTest, SlowerThanPredictedReplansOnMoreGpusWithTheSameBatch) {
  Scenario s = Running();
  ReplanInputs& in = s.inputs;
  in.measured_step_seconds = 1.5 * in.current_plan.step.step_seconds;
  auto d = DecideReplan(in);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->at_risk);
  EXPECT_LT(d->slack_seconds, 0);
  ASSERT_EQ(d->action, Decision::Action::kReplan) << d->reason << ": " << d->message;
  EXPECT_EQ(d->reason, "SlowerThanPredicted");
  ASSERT_TRUE(d->new_plan.has_value());
  const planner::Layout& l = d->new_plan->layout;
  EXPECT_GT(l.gpus(), in.current_plan.layout.gpus());
  EXPECT_EQ(
      static_cast<int64_t>(l.micro_batch_size) * l.gradient_accumulation_steps * l.data_parallel,
      1024);
  EXPECT_NEAR(*d->step_time_ratio, 1.5, 1e-9);
  // The new plan was calibrated with the measurement.
  EXPECT_NEAR(d->new_plan->step.calibration_ratio, 1.5, 1e-9);
  EXPECT_LT(*d->new_projected_completion_unix_seconds, d->projected_completion_unix_seconds);
  EXPECT_LE(*d->new_projected_completion_unix_seconds, *in.deadline_unix_seconds);
}

// A finite but absurd measurement (a broken exporter's 1e300 s step): the
// projection saturates in the far future and the job is at risk. Cast to
// int64 unclamped it became year 0, before the deadline.
TEST(ReplanPolicyTest, AnAbsurdMeasurementProjectsTheFarFuture) {
  Scenario s = Running();
  s.inputs.measured_step_seconds = 1e300;
  auto d = DecideReplan(s.inputs);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->at_risk);
  EXPECT_GT(d->projected_completion_unix_seconds, *s.inputs.deadline_unix_seconds);
  EXPECT_EQ(d->slack_seconds, static_cast<double>(*s.inputs.deadline_unix_seconds -
                                                  d->projected_completion_unix_seconds));
  EXPECT_THAT(d->message, HasSubstr("projected completion 9999-12-31T23:59:59Z"));
  EXPECT_THAT(d->message, HasSubstr("measured 1.000e+300 s/step"));
}

TEST(ReplanPolicyTest, FasterThanPredictedKeeps) {
  Scenario s = Running();
  s.inputs.measured_step_seconds = 0.7 * s.inputs.current_plan.step.step_seconds;
  auto d = DecideReplan(s.inputs);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->action, Decision::Action::kKeep);
  EXPECT_FALSE(d->at_risk);
  EXPECT_EQ(d->reason, "OnTrack");
  EXPECT_FALSE(d->new_plan.has_value());
  EXPECT_GT(d->slack_seconds, 0);
}

TEST(ReplanPolicyTest, GainWithinTheMarginKeeps) {
  Scenario s = Running();
  s.inputs.measured_step_seconds = 1.5 * s.inputs.current_plan.step.step_seconds;
  ReplanOptions options;
  options.min_improvement_fraction = 0.9;  // no plan gains 90% of the remaining time
  auto d = DecideReplan(s.inputs, options);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->action, Decision::Action::kKeep);
  EXPECT_TRUE(d->at_risk);
  EXPECT_EQ(d->reason, "ImprovementBelowMargin");
  EXPECT_TRUE(d->new_plan.has_value());
}

TEST(ReplanPolicyTest, MarginIsAtLeastTenMinutes) {
  Scenario s = Running();
  s.inputs.measured_step_seconds = 1.5 * s.inputs.current_plan.step.step_seconds;
  ReplanOptions options;
  options.min_improvement_fraction = 0;
  options.min_improvement_seconds = 1e9;  // longer than any gain
  auto d = DecideReplan(s.inputs, options);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Decision::Action::kKeep);
  EXPECT_EQ(d->reason, "ImprovementBelowMargin");
}

TEST(ReplanPolicyTest, HysteresisKeepsWithAReason) {
  Scenario s = Running();
  s.inputs.measured_step_seconds = 1.5 * s.inputs.current_plan.step.step_seconds;
  s.inputs.last_replan_unix_seconds = kNow - 300;
  auto d = DecideReplan(s.inputs);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Decision::Action::kKeep);
  EXPECT_TRUE(d->at_risk);
  EXPECT_EQ(d->reason, "ReplanHysteresis");
  EXPECT_THAT(d->message, HasSubstr("last re-plan 5m"));
  EXPECT_FALSE(d->new_plan.has_value());

  s.inputs.last_replan_unix_seconds = kNow - 600;  // the interval has passed
  d = DecideReplan(s.inputs);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Decision::Action::kReplan);
}

TEST(ReplanPolicyTest, NoFreeGpusKeepsAtRiskAndSaysHowManyItNeeds) {
  Scenario s = Running();
  s.inputs.measured_step_seconds = 1.5 * s.inputs.current_plan.step.step_seconds;
  s.inputs.inventory = H100Pool(kNodes, 0);
  auto d = DecideReplan(s.inputs);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->action, Decision::Action::kKeep) << d->message;
  EXPECT_TRUE(d->at_risk);
  EXPECT_EQ(d->reason, "InsufficientGpus");
  EXPECT_THAT(d->message, ContainsRegex("needs [0-9]+ H100-SXM GPUs"));
  // Only the job's own GPUs were available to the planner.
  ASSERT_TRUE(d->new_plan.has_value());
  EXPECT_LE(d->new_plan->layout.gpus(), s.inputs.current_plan.layout.gpus());
}

TEST(ReplanPolicyTest, UnreachableDeadlineIsInfeasible) {
  Scenario s = Running();
  s.inputs.measured_step_seconds = 1.5 * s.inputs.current_plan.step.step_seconds;
  // The whole cluster is the job's own nodes, and the deadline is a minute
  // away: less than a relaunch's start-up, so no number of GPUs meets it.
  s.inputs.inventory = H100Pool(s.inputs.current_plan.layout.nodes, 0);
  s.inputs.deadline_unix_seconds = kNow + 60;
  auto d = DecideReplan(s.inputs);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->action, Decision::Action::kInfeasible) << d->reason << ": " << d->message;
  EXPECT_EQ(d->reason, "DeadlineUnreachable");
}

TEST(ReplanPolicyTest, NoMeasurementUsesThePrediction) {
  Scenario s = Running();
  ReplanInputs& in = s.inputs;
  auto d = DecideReplan(in);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->step_seconds_used, in.current_plan.step.step_seconds);
  EXPECT_NEAR(static_cast<double>(d->projected_completion_unix_seconds),
              static_cast<double>(kNow) + s.remaining_predicted_seconds, 1.0);
  EXPECT_FALSE(d->at_risk);  // the deadline leaves 25% on top of the prediction
  EXPECT_FALSE(d->step_time_ratio.has_value());

  // A deadline the prediction itself misses: at risk on the prediction alone.
  in.deadline_unix_seconds = kNow + static_cast<int64_t>(0.9 * s.remaining_predicted_seconds);
  d = DecideReplan(in);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->at_risk);
  EXPECT_EQ(d->action, Decision::Action::kReplan) << d->reason << ": " << d->message;
  EXPECT_EQ(d->reason, "DeadlineAtRisk");
}

// At launch, before any measurement, the projection is the plan's own
// completion less its start-up: the ETA a user sees beside the plan's
// predicted completion is the same instant, not one that leaves out the
// checkpoint writes and the expected failure rework.
TEST(ReplanPolicyTest, AtLaunchTheProjectionIsThePlansCompletionLessStartUp) {
  Scenario s = Running();
  ReplanInputs& in = s.inputs;
  in.completed_steps = 0;
  const planner::TotalTimeBreakdown& total = in.current_plan.total;
  ASSERT_GT(total.checkpoint_overhead_seconds + total.failure_rework_seconds, 60);
  auto d = DecideReplan(in);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_NEAR(static_cast<double>(d->projected_completion_unix_seconds),
              static_cast<double>(kNow) + total.total_seconds - total.startup_seconds, 1.0);
}

TEST(ReplanPolicyTest, SlackFractionMovesTheThreshold) {
  Scenario s = Running();
  ReplanInputs& in = s.inputs;
  in.measured_step_seconds = 1.1 * in.current_plan.step.step_seconds;
  // Projected 1.1 R, deadline 1.25 R: at risk only when slack > 0.15 / 1.25 = 12%.
  in.slack_fraction = 0.10;
  auto d = DecideReplan(in);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->at_risk);
  in.slack_fraction = 0.20;
  d = DecideReplan(in);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->at_risk);
}

TEST(ReplanPolicyTest, ReplanDisabledKeeps) {
  Scenario s = Running();
  s.inputs.measured_step_seconds = 1.5 * s.inputs.current_plan.step.step_seconds;
  s.inputs.job.replan.enabled = false;
  auto d = DecideReplan(s.inputs);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Decision::Action::kKeep);
  EXPECT_TRUE(d->at_risk);
  EXPECT_EQ(d->reason, "ReplanDisabled");
}

TEST(ReplanPolicyTest, InconsistentInputsAreInvalid) {
  Scenario s = Running();
  ReplanInputs in = s.inputs;
  in.completed_steps = in.total_steps + 1;
  EXPECT_EQ(DecideReplan(in).status().code(), StatusCode::kInvalidArgument);
  in = s.inputs;
  in.measured_step_seconds = 0;
  EXPECT_EQ(DecideReplan(in).status().code(), StatusCode::kInvalidArgument);
  in = s.inputs;
  in.total_steps = 0;
  EXPECT_EQ(DecideReplan(in).status().code(), StatusCode::kInvalidArgument);
}

TEST(ReplanPolicyTest, NoDeadlineIsNeverAtRisk) {
  Scenario s = Running();
  s.inputs.deadline_unix_seconds.reset();
  s.inputs.measured_step_seconds = 3 * s.inputs.current_plan.step.step_seconds;
  auto d = DecideReplan(s.inputs);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Decision::Action::kKeep);
  EXPECT_FALSE(d->at_risk);
  EXPECT_EQ(d->reason, "NoDeadline");
}

TEST(ReplanPolicyTest, FinishedJobKeeps) {
  Scenario s = Running();
  s.inputs.completed_steps = s.inputs.total_steps;
  s.inputs.measured_step_seconds = 10 * s.inputs.current_plan.step.step_seconds;
  auto d = DecideReplan(s.inputs);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, Decision::Action::kKeep);
  EXPECT_FALSE(d->at_risk);
  EXPECT_EQ(d->reason, "Completed");
}

}  // namespace
}  // namespace pacer::controller
