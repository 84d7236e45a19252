// How often the ranks read the stop claim (runner.h, point 4), and the plan
// fingerprint that decides whether a checkpoint's buffers are restored.
#include "core/runner.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace pacer::worker {
namespace {

TEST(StopCheckIntervalTest, AboutTwoSecondsOfStepsBetweenChecks) {
  EXPECT_EQ(StopCheckIntervalSteps(0.5), 4);
  EXPECT_EQ(StopCheckIntervalSteps(0.1), 20);
  EXPECT_EQ(StopCheckIntervalSteps(0.03), 66);
}

TEST(StopCheckIntervalTest, SlowOrUnmeasuredStepsAreCheckedEveryStep) {
  EXPECT_EQ(StopCheckIntervalSteps(5.0), 1);
  EXPECT_EQ(StopCheckIntervalSteps(0.0), 1);
  EXPECT_EQ(StopCheckIntervalSteps(-1.0), 1);
}

// A stop waits up to one interval. Short steps are the noisiest under CPU
// contention: a 2.9 ms sample meant a check every 689 steps, and a worker
// whose steps later ran 13 times slower outlasted its 25 s grace period and
// was killed without a checkpoint. Capped, the same slowdown stops in ~4 s.
TEST(StopCheckIntervalTest, ShortStepsAreCappedSoAStopStaysPrompt) {
  EXPECT_EQ(StopCheckIntervalSteps(0.0029), kMaxStopCheckSteps);
  EXPECT_EQ(StopCheckIntervalSteps(1e-6), kMaxStopCheckSteps);
  const double slowed_step_seconds = 13 * 0.0029;
  EXPECT_LT(static_cast<double>(StopCheckIntervalSteps(0.0029)) * slowed_step_seconds, 25.0 / 4);
}

WorkerConfig SmallPlan() {
  WorkerConfig c;
  c.world_size = 2;
  c.data_parallel = 2;
  c.micro_batch_size = 2;
  c.gradient_accumulation_steps = 4;
  c.precision = planner::Precision::kBf16;
  c.recompute = planner::Recompute::kNone;
  c.model.layers = 4;
  c.model.hidden_size = 256;
  c.model.attention_heads = 8;
  c.model.kv_heads = 8;
  c.model.ffn_hidden_size = 1024;
  c.model.ffn_kind = planner::FfnKind::kGelu;
  c.model.sequence_length = 128;
  c.model.vocab_size = 1000;
  return c;
}

// Each of these changes the buffers' shapes or meaning (heads regrouped
// over the same matrices) without changing the layout, the hidden size or
// the layer count: a checkpoint of one is never restored into the other.
TEST(PlanFingerprintTest, TheAttentionAndMlpShapeArePartOfIt) {
  const std::string base = PlanFingerprint(SmallPlan());
  const std::vector<std::pair<const char*, std::function<void(planner::ModelSpec&)>>> changes = {
      {"attention heads", [](planner::ModelSpec& m) { m.attention_heads = 4; }},
      {"kv heads", [](planner::ModelSpec& m) { m.kv_heads = 2; }},
      {"ffn size", [](planner::ModelSpec& m) { m.ffn_hidden_size = 768; }},
      {"ffn kind", [](planner::ModelSpec& m) { m.ffn_kind = planner::FfnKind::kSwiglu; }},
      {"tied embeddings", [](planner::ModelSpec& m) { m.tied_embeddings = !m.tied_embeddings; }},
      {"causal mask", [](planner::ModelSpec& m) { m.causal_attention = !m.causal_attention; }},
  };
  for (const auto& [what, change] : changes) {
    WorkerConfig c = SmallPlan();
    change(c.model);
    EXPECT_NE(PlanFingerprint(c), base) << what;
    EXPECT_EQ(AcceptedPlanFingerprints(c).front(), PlanFingerprint(c)) << what;
  }
}

// Checkpoints written before the attention and MLP shape were recorded stay
// usable after an upgrade: the string earlier workers wrote for this plan
// (their format, field for field) is accepted beside the current one.
TEST(PlanFingerprintTest, AnEarlierWorkersFingerprintOfThisPlanIsAccepted) {
  const std::vector<std::string> accepted = AcceptedPlanFingerprints(SmallPlan());
  ASSERT_EQ(accepted.size(), 2u);
  EXPECT_EQ(accepted[1], "t1 p1 v1 d2 z0 b2 k4 bf16 none L4 h256 s128 V1000");
  EXPECT_EQ(accepted[0].rfind(accepted[1] + " ", 0), 0u) << accepted[0];
}

}  // namespace
}  // namespace pacer::worker
