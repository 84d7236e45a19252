#include "cli/plan_output.h"

#include <cmath>
#include <string>

#include "pacer/planner/job_spec.h"
#include "pacer/planner/units.h"

namespace pacer::cli {
namespace {

double GiB(double bytes) { return RoundSignificant(bytes / kBytesPerGiB); }

Json Rounded(double x) { return RoundSignificant(x); }

}  // namespace

double RoundSignificant(double x, int digits) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(x))));
  const double scale = std::pow(10.0, digits - 1 - magnitude);
  return std::round(x * scale) / scale;
}

Json LayoutJson(const planner::Layout& l) {
  Json layout;
  layout["gpuType"] = l.gpu_type;
  layout["pool"] = l.pool;
  layout["nodes"] = l.nodes;
  layout["gpusPerNode"] = l.gpus_per_node;
  layout["gpus"] = l.gpus();
  layout["tensorParallel"] = l.tensor_parallel;
  layout["pipelineParallel"] = l.pipeline_parallel;
  layout["dataParallel"] = l.data_parallel;
  layout["virtualStages"] = l.virtual_stages;
  layout["sequenceParallel"] = l.sequence_parallel;
  layout["zeroStage"] = l.zero_stage;
  layout["microBatchSize"] = l.micro_batch_size;
  layout["gradientAccumulationSteps"] = l.gradient_accumulation_steps;
  layout["activationCheckpointing"] = planner::RecomputeName(l.recompute);
  return layout;
}

Json PlanJson(const planner::Evaluation& evaluation, int64_t now_unix_seconds) {
  Json plan = LayoutJson(evaluation.layout);
  plan["predictedStepSeconds"] = Rounded(evaluation.step.step_seconds);
  plan["predictedTotalSeconds"] = Rounded(evaluation.total.total_seconds);
  plan["predictedMemoryGiB"] = GiB(evaluation.memory.total_bytes());
  plan["predictedCompletionTime"] = planner::FormatRfc3339(
      planner::CompletionUnixSeconds(now_unix_seconds, evaluation.total.total_seconds));
  plan["gpuHours"] = Rounded(evaluation.gpu_hours);
  // 0 means the inventory has no price: unknown, not free.
  plan["cost"] = evaluation.cost > 0 ? Rounded(evaluation.cost) : Json(nullptr);
  plan["mfu"] = Rounded(evaluation.mfu);
  return plan;
}

Json BreakdownJson(const planner::Evaluation& evaluation) {
  const planner::MemoryBreakdown& m = evaluation.memory;
  Json memory;
  memory["weightsGiB"] = GiB(m.weights_bytes);
  memory["gradientsGiB"] = GiB(m.gradients_bytes);
  memory["optimizerGiB"] = GiB(m.optimizer_bytes);
  memory["activationsGiB"] = GiB(m.activations_bytes);
  memory["logitsGiB"] = GiB(m.logits_bytes);
  memory["buffersGiB"] = GiB(m.buffers_bytes);
  memory["reserveGiB"] = GiB(m.reserve_bytes);
  memory["totalGiB"] = GiB(m.total_bytes());
  memory["capacityGiB"] = GiB(m.capacity_bytes);

  const planner::StepTimeBreakdown& s = evaluation.step;
  Json step;
  step["computeSeconds"] = Rounded(s.compute_seconds);
  step["recomputeSeconds"] = Rounded(s.recompute_seconds);
  step["attentionKernel"] = planner::AttentionKernelName(s.attention);
  step["attentionSeconds"] = Rounded(s.attention_seconds);
  step["tensorParallelCommSeconds"] = Rounded(s.tp_comm_seconds);
  step["tensorParallelExposedSeconds"] = Rounded(s.tp_exposed_seconds);
  step["tensorParallelOverlap"] = s.tp_overlap;
  step["shardingOverheadSeconds"] = Rounded(s.sharding_overhead_seconds);
  step["pipelineBubbleSeconds"] = Rounded(s.pp_bubble_seconds);
  step["pipelineP2PSeconds"] = Rounded(s.pp_p2p_seconds);
  step["dataParallelCommSeconds"] = Rounded(s.dp_comm_seconds);
  step["dataParallelExposedSeconds"] = Rounded(s.dp_exposed_seconds);
  step["dataParallelOverlap"] = s.dp_overlap;
  step["dataParallelAlgorithm"] = planner::CollectiveAlgorithmName(s.dp_collective.algorithm);
  step["dataParallelBusBandwidthGBps"] = Rounded(s.dp_collective.busbw_bytes_per_second / 1e9);
  step["overheadSeconds"] = Rounded(s.overhead_seconds);
  step["latencyFloorSeconds"] = Rounded(s.latency_floor_seconds);
  step["optimizerSeconds"] = Rounded(s.optimizer_seconds);
  step["calibrationRatio"] = Rounded(s.calibration_ratio);
  step["stepSeconds"] = Rounded(s.step_seconds);

  const planner::TotalTimeBreakdown& t = evaluation.total;
  Json total;
  total["optimizerSteps"] = t.optimizer_steps;
  total["trainingSeconds"] = Rounded(t.training_seconds);
  total["startupSeconds"] = Rounded(t.startup_seconds);
  total["checkpointIntervalSeconds"] = Rounded(t.checkpoint_interval_seconds);
  total["checkpointWriteSeconds"] = Rounded(t.checkpoint_write_seconds);
  total["checkpointOverheadSeconds"] = Rounded(t.checkpoint_overhead_seconds);
  total["jobMTBFSeconds"] = Rounded(t.job_mtbf_seconds);
  total["failureReworkSeconds"] = Rounded(t.failure_rework_seconds);
  total["totalSeconds"] = Rounded(t.total_seconds);

  Json breakdown;
  breakdown["memory"] = std::move(memory);
  breakdown["stepTime"] = std::move(step);
  breakdown["totalTime"] = std::move(total);
  return breakdown;
}

Json SearchStatsJson(const planner::SearchStats& stats) {
  Json search;
  search["layoutsConsidered"] = stats.layouts_considered;
  search["evaluated"] = stats.evaluated;
  search["pruned"] = stats.pruned;
  return search;
}

Json AdviceJson(const planner::InfeasibleAdvice& advice) {
  Json json;
  json["lateSeconds"] = Rounded(advice.late_seconds);
  json["earliestCompletionTime"] = planner::FormatRfc3339(advice.earliest_completion_unix_seconds);
  json["gpusNeeded"] = advice.gpus_needed ? Json(*advice.gpus_needed) : Json(nullptr);
  json["gpusNeededType"] = advice.gpus_needed_type ? Json(*advice.gpus_needed_type) : Json(nullptr);
  json["nearbyGlobalBatchSizes"] = advice.nearby_global_batch_sizes;
  json["summary"] = advice.summary;
  return json;
}

Json PlanResultJson(const planner::PlanResult& result) {
  const int64_t now = result.now_unix_seconds;
  Json json;
  json["plan"] = result.plan ? PlanJson(*result.plan, now) : Json(nullptr);
  json["feasible"] = result.feasible;
  json["alternatives"] = Json::array();
  for (const planner::Evaluation& alternative : result.alternatives) {
    json["alternatives"].push_back(PlanJson(alternative, now));
  }
  json["breakdown"] = result.plan ? BreakdownJson(*result.plan) : Json(nullptr);
  json["deadline"] = result.deadline_unix_seconds
                         ? Json(planner::FormatRfc3339(*result.deadline_unix_seconds))
                         : Json(nullptr);
  json["now"] = planner::FormatRfc3339(now);
  json["warnings"] = result.warnings;
  json["search"] = SearchStatsJson(result.stats);
  if (!result.feasible && result.advice) json["advice"] = AdviceJson(*result.advice);
  return json;
}

Json RejectionsJson(const std::vector<planner::RejectionSummary>& rejections,
                    int64_t now_unix_seconds) {
  Json reasons = Json::array();
  for (const planner::RejectionSummary& rejection : rejections) {
    Json entry;
    entry["reason"] = planner::RejectReasonName(rejection.reason);
    entry["count"] = rejection.count;
    entry["detail"] = rejection.detail;
    entry["best"] = rejection.best ? PlanJson(*rejection.best, now_unix_seconds) : Json(nullptr);
    // The number the best candidate lost on, for out-of-memory: its GPU's size.
    entry["bestCapacityGiB"] =
        rejection.best ? Json(GiB(rejection.best->memory.capacity_bytes)) : Json(nullptr);
    reasons.push_back(std::move(entry));
  }
  return reasons;
}

}  // namespace pacer::cli
