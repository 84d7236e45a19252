// Local mode's re-plan margins (local/run_command.h, LocalReconcilerOptions):
// a relaunch there costs a process start, not a pod's, so a job with minutes
// left re-plans when a faster layout saves more than twice that start. With
// a cluster's margins (600 s, twice a pod's start-up) such a job never
// re-planned, however late.
#include <gtest/gtest.h>

#include "core/replan_policy.h"
#include "local/run_command.h"
#include "pacer/planner/job_parser.h"
#include "pacer/planner/search.h"

namespace pacer::controller {
namespace {

constexpr int64_t kLocalReplanNow = 1795305600;  // 2026-11-22T00:00:00Z

planner::Inventory LocalReplanH100Pool(int free_gpus) {
  planner::Inventory inventory;
  inventory.node_pools.push_back({"h100", "H100-SXM", 16, 8, free_gpus, 3200, 0, 2.5});
  return inventory;
}

// A 7B job of a few minutes planned on 16 GPUs with `options`' constants,
// 10% done, measured 1.5x slower than predicted, due at 1.25x its remaining
// predicted time: late, with the rest of the pool free.
ReplanInputs ShortJobBehind(const ReplanOptions& options) {
  auto job = planner::ParseTrainJob(
      "apiVersion: pacer.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: short}\nspec:\n"
      "  model: {layers: 32, hiddenSize: 4096, attentionHeads: 32, ffnHiddenSize: 11008,\n"
      "          ffnKind: swiglu, vocabSize: 32000, sequenceLength: 4096}\n"
      "  data: {tokens: 50M}\n"
      "  training: {globalBatchSize: 1024}\n"
      "  objective: time\n"
      "  resources: {gpuTypes: [H100-SXM]}\n");
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  ReplanInputs in;
  if (!job.ok()) return in;
  planner::PlanOptions plan_options;
  plan_options.now_unix_seconds = kLocalReplanNow;
  plan_options.constants = options.constants;
  auto initial = planner::Plan(*job, LocalReplanH100Pool(16), {}, plan_options);
  EXPECT_TRUE(initial.ok() && initial->plan) << initial.status().ToString();
  if (!initial.ok() || !initial->plan) return in;
  in.job = *job;
  in.current_plan = *initial->plan;
  in.total_steps = in.current_plan.total.optimizer_steps;
  in.completed_steps = in.total_steps / 10;
  in.now_unix_seconds = kLocalReplanNow;
  const planner::TotalTimeBreakdown& total = in.current_plan.total;
  const double remaining_seconds = static_cast<double>(in.total_steps - in.completed_steps) *
                                   (total.total_seconds - total.startup_seconds) /
                                   static_cast<double>(total.optimizer_steps);
  in.deadline_unix_seconds = kLocalReplanNow + static_cast<int64_t>(1.25 * remaining_seconds);
  in.measured_step_seconds = 1.5 * in.current_plan.step.step_seconds;
  in.inventory = LocalReplanH100Pool(16 * 8 - in.current_plan.layout.gpus());
  return in;
}

TEST(LocalReplanTest, AJobWithMinutesLeftReplansWithLocalMargins) {
  const ReplanOptions local = LocalReconcilerOptions(3).replan;
  const ReplanInputs in = ShortJobBehind(local);
  ASSERT_GT(in.total_steps, 0);
  const double remaining = static_cast<double>(*in.deadline_unix_seconds - kLocalReplanNow) / 1.25;
  // Projected at 1.5x: a gain can only be below ten minutes.
  ASSERT_LT(1.5 * remaining, 600) << "a job of a few minutes";

  auto replanned = DecideReplan(in, local);
  ASSERT_TRUE(replanned.ok()) << replanned.status().ToString();
  EXPECT_TRUE(replanned->at_risk);
  EXPECT_EQ(replanned->action, Decision::Action::kReplan)
      << replanned->reason << ": " << replanned->message;

  // The same start-up with a cluster's margins: the gain is below ten minutes.
  ReplanOptions cluster;
  cluster.constants = local.constants;
  auto kept = DecideReplan(in, cluster);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->action, Decision::Action::kKeep);
  EXPECT_EQ(kept->reason, "ImprovementBelowMargin") << kept->message;
}

}  // namespace
}  // namespace pacer::controller
