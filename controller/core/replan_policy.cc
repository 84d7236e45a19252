#include "core/replan_policy.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "pacer/planner/search.h"
#include "pacer/planner/units.h"

namespace pacer::controller {
namespace {

std::string Seconds(double s) { return planner::FormatDurationHuman(s); }

std::string Fixed(double x, int decimals) {
  char buffer[64];
  // Exponent form for what %f would spell in hundreds of digits (and the
  // buffer cut short): a broken metric's 1e300 s step.
  std::snprintf(buffer, sizeof buffer, std::fabs(x) < 1e12 ? "%.*f" : "%.*e", decimals, x);
  return buffer;
}

Status Validate(const ReplanInputs& in) {
  if (in.total_steps <= 0) return InvalidArgumentError("totalSteps must be positive");
  if (in.completed_steps < 0 || in.completed_steps > in.total_steps) {
    return InvalidArgumentError("stepsCompleted must be within 0..totalSteps, got " +
                                std::to_string(in.completed_steps));
  }
  if (in.measured_step_seconds &&
      !(*in.measured_step_seconds > 0 && std::isfinite(*in.measured_step_seconds))) {
    return InvalidArgumentError("measured step seconds must be positive and finite");
  }
  if (!(in.current_plan.step.step_seconds > 0)) {
    return InvalidArgumentError("the plan in force has no predicted step time");
  }
  if (!(in.slack_fraction >= 0 && in.slack_fraction < 1)) {
    return InvalidArgumentError("slack must be within [0, 1)");
  }
  return Status::Ok();
}

// The inventory the job could use: what is free plus its own GPUs.
planner::Inventory WithOwnGpus(const planner::Inventory& inventory, const planner::Layout& layout) {
  planner::Inventory result = inventory;
  for (planner::NodePool& pool : result.node_pools) {
    if (pool.name == layout.pool) {
      pool.free_gpus = std::min(pool.nodes * pool.gpus_per_node, pool.free_gpus + layout.gpus());
      // Which nodes the job's GPUs are on is not known here: the whole-node
      // estimate stands in (the relaunch checks the layout against each
      // node's free GPUs, RecheckLayout).
      pool.free_gpus_by_node.clear();
    }
  }
  return result;
}

}  // namespace

planner::JobSpec RemainingJob(const planner::JobSpec& job, int64_t remaining_steps,
                              int64_t deadline) {
  planner::JobSpec remaining = job;
  remaining.data.tokens.reset();
  remaining.data.samples =
      static_cast<double>(remaining_steps) * static_cast<double>(job.training.global_batch_size);
  remaining.data.epochs = 1;
  remaining.deadline_unix_seconds = deadline;
  remaining.max_duration_seconds.reset();
  return remaining;
}

double ProjectCompletion(double now_unix_seconds, int64_t remaining_steps, double step_seconds,
                         const planner::Evaluation& plan) {
  // The plan's checkpoint writes and expected failure rework fall on the
  // remaining steps as on all of them, so that at launch the projection is
  // the plan's own completion less its start-up (and re-planning compares a
  // new plan's total with a projection that pays the same costs).
  const planner::TotalTimeBreakdown& total = plan.total;
  const double overhead_per_step =
      total.optimizer_steps > 0
          // max: a stored plan's NaN or negative overheads count as none.
          ? std::max(0.0, total.checkpoint_overhead_seconds + total.failure_rework_seconds) /
                static_cast<double>(total.optimizer_steps)
          : 0.0;
  return now_unix_seconds + static_cast<double>(std::max<int64_t>(remaining_steps, 0)) *
                                (step_seconds + overhead_per_step);
}

const char* ActionName(Decision::Action action) {
  switch (action) {
    case Decision::Action::kKeep:
      return "Keep";
    case Decision::Action::kReplan:
      return "Replan";
    case Decision::Action::kInfeasible:
      return "Infeasible";
  }
  return "Keep";
}

double StepTimeRatio(double measured_step_seconds, const planner::Evaluation& plan) {
  const double applied = plan.step.calibration_ratio > 0 ? plan.step.calibration_ratio : 1.0;
  return measured_step_seconds / (plan.step.step_seconds / applied);
}

double AtRiskThreshold(double deadline_unix_seconds, double now_unix_seconds,
                       double slack_fraction) {
  return deadline_unix_seconds -
         slack_fraction * std::max(0.0, deadline_unix_seconds - now_unix_seconds);
}

StatusOr<Decision> DecideReplan(const ReplanInputs& in, const ReplanOptions& options) {
  RETURN_IF_ERROR(Validate(in));
  Decision d;
  const double now = static_cast<double>(in.now_unix_seconds);
  const int64_t remaining_steps = in.total_steps - in.completed_steps;
  const double predicted = in.current_plan.step.step_seconds;
  d.step_seconds_used = in.measured_step_seconds.value_or(predicted);

  const double projected =
      ProjectCompletion(now, remaining_steps, d.step_seconds_used, in.current_plan);
  d.projected_completion_unix_seconds = planner::CeilUnixSeconds(projected);
  if (!in.deadline_unix_seconds) {
    d.reason = "NoDeadline";
    d.message = "the job has no deadline; projected completion " +
                planner::FormatRfc3339(d.projected_completion_unix_seconds);
    return d;
  }
  const int64_t deadline_unix_seconds = *in.deadline_unix_seconds;
  const double deadline = static_cast<double>(deadline_unix_seconds);
  // From the clamped completion: the unclamped projection of an absurd
  // measurement is -inf slack, which no status field can hold.
  d.slack_seconds = deadline - static_cast<double>(d.projected_completion_unix_seconds);
  const double threshold = AtRiskThreshold(deadline, now, in.slack_fraction);
  d.at_risk = remaining_steps > 0 && projected > threshold;

  const std::string pace = in.measured_step_seconds
                               ? "measured " + Fixed(*in.measured_step_seconds, 3) +
                                     " s/step vs predicted " + Fixed(predicted, 3) + " s/step"
                               : "no measurement yet, predicted " + Fixed(predicted, 3) + " s/step";
  const std::string projection = "projected completion " +
                                 planner::FormatRfc3339(d.projected_completion_unix_seconds) +
                                 ", deadline " + planner::FormatRfc3339(deadline_unix_seconds);

  if (remaining_steps == 0) {
    d.reason = "Completed";
    d.message = "all " + std::to_string(in.total_steps) + " steps are done";
    return d;
  }
  if (!d.at_risk) {
    d.reason = "OnTrack";
    d.message = pace + "; " + projection + " (" + Seconds(d.slack_seconds) + " of slack)";
    return d;
  }
  if (deadline_unix_seconds <= in.now_unix_seconds) {
    d.action = Decision::Action::kInfeasible;
    d.reason = "DeadlinePassed";
    d.message = "the deadline " + planner::FormatRfc3339(deadline_unix_seconds) +
                " has passed with " + std::to_string(remaining_steps) + " steps left";
    return d;
  }
  const std::string risk = pace + "; " + projection + ", later than deadline minus " +
                           Fixed(in.slack_fraction * 100, 1) + "% slack";
  if (!in.job.replan.enabled) {
    d.reason = "ReplanDisabled";
    d.message = risk + "; re-planning is disabled (spec.replan.enabled)";
    return d;
  }
  if (in.last_replan_unix_seconds) {
    const double since = now - static_cast<double>(*in.last_replan_unix_seconds);
    if (since < options.min_interval_seconds) {
      d.reason = "ReplanHysteresis";
      d.message = risk + "; last re-plan " + Seconds(since) + " ago, waiting at least " +
                  Seconds(options.min_interval_seconds) + " between re-plans";
      return d;
    }
  }

  // Calibrate the model with what the plan in force achieves. The plan's own
  // prediction may already include a ratio: measure against the raw model.
  planner::Calibration calibration = in.calibration;
  if (in.measured_step_seconds) {
    d.step_time_ratio = StepTimeRatio(*in.measured_step_seconds, in.current_plan);
    calibration.by_gpu_type[in.current_plan.layout.gpu_type].step_time_ratio = d.step_time_ratio;
  }

  // Plan the remaining steps to finish by the at-risk threshold, so that the
  // new plan is not itself at risk.
  const int64_t plan_deadline =
      std::max(in.now_unix_seconds + 1, static_cast<int64_t>(std::floor(threshold)));
  const planner::JobSpec remaining = RemainingJob(in.job, remaining_steps, plan_deadline);
  planner::PlanOptions plan_options;
  plan_options.now_unix_seconds = in.now_unix_seconds;
  plan_options.alternatives = 0;
  plan_options.constants = options.constants;
  const StatusOr<planner::PlanResult> result = planner::Plan(
      remaining, WithOwnGpus(in.inventory, in.current_plan.layout), calibration, plan_options);
  if (!result.ok() || !result->plan) {
    d.reason = "NoPlan";
    d.message = risk + "; the planner found no plan: " + result.status().message();
    return d;
  }
  d.new_plan = *result->plan;
  const double new_completion = now + d.new_plan->total.total_seconds;
  d.new_projected_completion_unix_seconds = planner::CeilUnixSeconds(new_completion);
  const double improvement = projected - new_completion;
  const double margin = std::max(options.min_improvement_fraction * (projected - now),
                                 options.min_improvement_seconds);
  const std::string candidate = "the best plan on the GPUs available (" +
                                d.new_plan->layout.ToString() + ") finishes " +
                                planner::FormatRfc3339(*d.new_projected_completion_unix_seconds);

  std::string shortfall;
  if (!result->feasible && result->advice) {
    if (result->advice->gpus_needed) {
      shortfall = "meeting the deadline needs " + std::to_string(*result->advice->gpus_needed) +
                  " " + result->advice->gpus_needed_type.value_or("") +
                  " GPUs (the plan in force uses " + std::to_string(in.current_plan.layout.gpus()) +
                  ")";
    } else {
      shortfall = "no number of GPUs of the allowed types on this cluster meets the deadline";
    }
  }

  if (improvement > margin) {
    d.action = Decision::Action::kReplan;
    d.reason = in.measured_step_seconds && d.step_time_ratio && *d.step_time_ratio > 1
                   ? "SlowerThanPredicted"
                   : "DeadlineAtRisk";
    d.message = risk + "; " + candidate + ", " + Seconds(improvement) + " sooner";
    if (!shortfall.empty()) d.message += "; still late: " + shortfall;
    return d;
  }
  if (!result->feasible && result->advice && !result->advice->gpus_needed) {
    d.action = Decision::Action::kInfeasible;
    d.reason = "DeadlineUnreachable";
    d.message = risk + "; " + shortfall;
    return d;
  }
  if (!shortfall.empty()) {
    d.reason = "InsufficientGpus";
    d.message = risk + "; " + shortfall + "; " + candidate;
    return d;
  }
  d.reason = "ImprovementBelowMargin";
  d.message = risk + "; " + candidate + ", " + Seconds(std::max(0.0, improvement)) +
              " sooner, within the margin of " + Seconds(margin);
  return d;
}

}  // namespace pacer::controller
