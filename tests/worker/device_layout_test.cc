// The GPU backend's memory layout against the planner: the bytes it plans
// for weights, gradients, optimizer state, activations and logits are the
// planner's own numbers for the same plan (planner::PredictMemory), what it
// allocates stays within rounding of them, and the communicator groups
// partition the world the way Megatron's rank order says.
#include "core/device_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "pacer/planner/cost_model.h"
#include "pacer/planner/gpu_catalog.h"
#include "test_plans.h"

namespace pacer::worker {
namespace {

using planner::Recompute;

using testing::TestPlan;

using testing::PlannerMemory;

struct PlanCase {
  int t, p, d, v, zero, b, k;
  Recompute r;
  planner::Precision precision;
};

const PlanCase kCases[] = {
    {1, 1, 1, 1, 0, 2, 1, Recompute::kNone, planner::Precision::kBf16},
    {2, 1, 4, 1, 1, 1, 4, Recompute::kSelective, planner::Precision::kBf16},
    {2, 4, 1, 1, 0, 1, 8, Recompute::kNone, planner::Precision::kFp16},
    {4, 2, 2, 1, 2, 2, 4, Recompute::kFull, planner::Precision::kBf16},
    {1, 4, 2, 2, 3, 1, 8, Recompute::kSelective, planner::Precision::kFp32},
    {2, 2, 2, 1, 1, 1, 1, Recompute::kNone, planner::Precision::kTf32},  // k < p
};

TEST(DeviceLayoutTest, StateBytesAreThePlannersShardedState) {
  for (const PlanCase& pc : kCases) {
    const WorkerConfig c =
        TestPlan(pc.t, pc.p, pc.d, pc.v, pc.zero, pc.b, pc.k, pc.r, pc.precision);
    auto s = BuildStepSchedule(c, 0);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto plan = PlanDeviceMemory(c, *s);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    const planner::ShardedStateBytes want = planner::ShardedState(
        s->stage_parameters,
        planner::StateBytes(c.precision, c.optimizer, WorkerConfig::kFp32Gradients), c.zero_stage,
        c.data_parallel);
    EXPECT_DOUBLE_EQ(plan->planned.weights_bytes, want.weights_bytes);
    EXPECT_DOUBLE_EQ(plan->planned.gradients_bytes, want.gradients_bytes);
    EXPECT_DOUBLE_EQ(plan->planned.optimizer_bytes, want.optimizer_bytes);
    // The planner's most loaded GPU is the first stage, rank 0 here.
    const planner::MemoryBreakdown mem = PlannerMemory(c);
    EXPECT_DOUBLE_EQ(plan->planned.weights_bytes, mem.weights_bytes);
    EXPECT_DOUBLE_EQ(plan->planned.gradients_bytes, mem.gradients_bytes);
    EXPECT_DOUBLE_EQ(plan->planned.optimizer_bytes, mem.optimizer_bytes);
    // What is allocated differs only by replicated norm gains and padding.
    EXPECT_NEAR(plan->allocated.weights_bytes / want.weights_bytes, 1.0, 2e-3);
    EXPECT_NEAR(plan->allocated.gradients_bytes / want.gradients_bytes, 1.0, 2e-3);
    EXPECT_NEAR(plan->allocated.optimizer_bytes / want.optimizer_bytes, 1.0, 2e-3);
  }
}

TEST(DeviceLayoutTest, ActivationBytesAreTheLayerBytesTimesLayersInFlight) {
  for (const PlanCase& pc : kCases) {
    for (planner::AttentionKernel a :
         {planner::AttentionKernel::kFused, planner::AttentionKernel::kUnfused}) {
      WorkerConfig c = TestPlan(pc.t, pc.p, pc.d, pc.v, pc.zero, pc.b, pc.k, pc.r, pc.precision);
      c.attention = a;
      auto s = BuildStepSchedule(c, 0);  // first stage
      ASSERT_TRUE(s.ok());
      auto plan = PlanDeviceMemory(c, *s);
      ASSERT_TRUE(plan.ok());
      const planner::MemoryBreakdown mem = PlannerMemory(c);
      const double element_scale = plan->element_bytes / 2.0;
      const double per_layer = element_scale * planner::LayerActivationBytes(
                                                   c.model, c.micro_batch_size, c.tensor_parallel,
                                                   c.tensor_parallel > 1, c.recompute, c.attention);
      // 1F1B: the first stage stashes min(p, k) micro-batches of its L / p layers.
      const double layers_in_flight = static_cast<double>(std::min<int64_t>(pc.p, pc.k)) *
                                      c.model.layers / pc.p *
                                      (pc.v > 1 ? 1.0 + (pc.p - 1.0) / (pc.p * pc.v) : 1.0);
      double want = per_layer * layers_in_flight;
      if (c.recompute == Recompute::kFull) {
        want += element_scale *
                planner::LayerActivationBytes(c.model, c.micro_batch_size, c.tensor_parallel,
                                              c.tensor_parallel > 1, Recompute::kNone, c.attention);
      }
      EXPECT_NEAR(plan->planned.activations_bytes / want, 1.0, 1e-12)
          << pc.t << " " << pc.p << " " << pc.v;
      // The planner reports the first stage's activations whenever they
      // dominate; every case here is such a plan or a single stage.
      if (pc.p == 1 || mem.logits_bytes == 0) {
        EXPECT_NEAR(plan->planned.activations_bytes / mem.activations_bytes, 1.0, 1e-12);
      }
      // The stash holds no more than the planner counts (Korthikanti's 34 s b
      // h also counts dropout masks; the backend keeps no dropout).
      EXPECT_LE(plan->allocated.activations_bytes, plan->planned.activations_bytes * (1 + 1e-12));
      EXPECT_GT(plan->allocated.activations_bytes, 0.5 * plan->planned.activations_bytes);
    }
  }
}

TEST(DeviceLayoutTest, LogitsOnlyOnTheLastStage) {
  const WorkerConfig c = TestPlan(2, 4, 1, 1, 0, 1, 8, Recompute::kNone);
  auto first = BuildStepSchedule(c, GlobalRankOf(c, {0, 0, 0}));
  auto last = BuildStepSchedule(c, GlobalRankOf(c, {0, 0, 3}));
  ASSERT_TRUE(first.ok() && last.ok());
  auto first_plan = PlanDeviceMemory(c, *first);
  auto last_plan = PlanDeviceMemory(c, *last);
  ASSERT_TRUE(first_plan.ok() && last_plan.ok());
  EXPECT_EQ(first_plan->planned.logits_bytes, 0);
  const planner::MemoryBreakdown mem = PlannerMemory(c);
  EXPECT_NEAR(last_plan->planned.logits_bytes, 512.0 * 32000 / 2 * (2 + 4),
              1e-6);  // s b V / t x (16-bit + fp32 copy)
  if (mem.logits_bytes > 0) {
    EXPECT_DOUBLE_EQ(last_plan->planned.logits_bytes, mem.logits_bytes);
  }
  // The last stage of 1F1B keeps one micro-batch in flight, the first p.
  EXPECT_EQ(last_plan->slots_in_flight, 1);
  EXPECT_EQ(first_plan->slots_in_flight, 4);
  EXPECT_EQ(first_plan->parameters.output_table_offset, -1);
  EXPECT_EQ(last_plan->parameters.input_table_offset, -1);
}

TEST(DeviceLayoutTest, BucketsSplitEvenlyIntoAlignedShards) {
  for (const PlanCase& pc : kCases) {
    const WorkerConfig c =
        TestPlan(pc.t, pc.p, pc.d, pc.v, pc.zero, pc.b, pc.k, pc.r, pc.precision);
    auto s = BuildStepSchedule(c, 0);
    auto plan = PlanDeviceMemory(c, *s);
    ASSERT_TRUE(plan.ok());
    const ParameterLayout& p = plan->parameters;
    EXPECT_GE(p.padded_elements, p.elements);
    EXPECT_LT(p.padded_elements - p.elements, kGradientBuckets * pc.d * kShardAlignElements);
    EXPECT_EQ(p.bucket_elements * kGradientBuckets, p.padded_elements);
    EXPECT_EQ(p.piece_elements * pc.d, p.bucket_elements);
    EXPECT_EQ(p.shard_elements, p.piece_elements * kGradientBuckets);
    EXPECT_EQ(p.piece_elements % kShardAlignElements, 0);
    // The layers tile the vector between the tables.
    EXPECT_EQ(p.LayerOffset(s->chunks - 1, s->layers_per_chunk - 1) + p.layer.total_elements(),
              p.output_table_offset >= p.layers_offset ? p.output_table_offset : p.elements);
    // Matrices plus replicated norms: the planner's parameters to within the
    // norms' (1 - 1/t) share.
    EXPECT_NEAR(static_cast<double>(p.elements) / s->stage_parameters, 1.0, 1e-3);
  }
}

TEST(DeviceLayoutTest, TiedSingleStageSharesOneTable) {
  WorkerConfig c = TestPlan(1, 1, 1, 1, 0, 1, 1, Recompute::kNone);
  c.model.tied_embeddings = true;
  auto s = BuildStepSchedule(c, 0);
  auto plan = PlanDeviceMemory(c, *s);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->parameters.input_table_offset, plan->parameters.output_table_offset);
  EXPECT_NEAR(static_cast<double>(plan->parameters.elements) / s->stage_parameters, 1.0, 1e-12);
}

TEST(DeviceLayoutTest, RejectsPlansThatDoNotSplitEvenly) {
  WorkerConfig c = TestPlan(2, 1, 1, 1, 0, 1, 1, Recompute::kNone);
  auto s = BuildStepSchedule(c, 0);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  c.model.sequence_length = 513;  // a sequence that does not split over t = 2
  // The configuration refuses it first, naming the variable (the schedule
  // validates it)...
  const auto refused = BuildStepSchedule(c, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("PACER_SEQUENCE_LENGTH"), std::string::npos)
      << refused.status().message();
  // ...and the memory plan still checks it for itself.
  auto plan = PlanDeviceMemory(c, *s);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("sequence"), std::string::npos);
}

// A vocabulary t does not divide is padded to whole rows per rank, as the
// planner counts it (it was refused, so a planned job failed at launch).
// 32001 tokens over t = 2 are laid out, scheduled and counted as 32002.
TEST(DeviceLayoutTest, AVocabularyThatDoesNotSplitIsPaddedAsPlanned) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    WorkerConfig c = TestPlan(2, 1, 1, 1, 0, 1, 1, Recompute::kNone);
    c.model.tied_embeddings = tied;
    c.model.vocab_size = 32001;
    auto s = BuildStepSchedule(c, 0);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto plan = PlanDeviceMemory(c, *s);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    c.model.vocab_size = 32002;
    auto even_s = BuildStepSchedule(c, 0);
    ASSERT_TRUE(even_s.ok()) << even_s.status().ToString();
    auto even = PlanDeviceMemory(c, *even_s);
    ASSERT_TRUE(even.ok()) << even.status().ToString();
    EXPECT_EQ(plan->dims.vocab, 16001);
    EXPECT_EQ(plan->parameters.table_elements, 16001 * plan->dims.hidden);
    EXPECT_EQ(plan->parameters.elements, even->parameters.elements);
    EXPECT_EQ(plan->planned.total_bytes(), even->planned.total_bytes());
    EXPECT_EQ(plan->allocated.total_bytes(), even->allocated.total_bytes());
    EXPECT_EQ(s->logits.n, 16001.0);
    EXPECT_EQ(s->stage_parameters, even_s->stage_parameters);
  }
}

TEST(DeviceLayoutTest, CommunicatorGroupsPartitionTheWorld) {
  const WorkerConfig c = TestPlan(2, 2, 4, 1, 0, 1, 2, Recompute::kNone);
  for (Group g : {Group::kTensor, Group::kData, Group::kPipeline}) {
    std::set<int> seen;
    std::set<std::string> keys;
    for (int rank = 0; rank < c.world_size; ++rank) {
      const CommunicatorGroup group = CommunicatorGroupOf(c, CoordinatesOf(c, rank), g);
      ASSERT_EQ(static_cast<int>(group.members.size()), group.size);
      EXPECT_EQ(group.members[group.rank], rank);
      // Every member computes the same group (same members, same key).
      for (int member : group.members) {
        const CommunicatorGroup other = CommunicatorGroupOf(c, CoordinatesOf(c, member), g);
        EXPECT_EQ(other.members, group.members);
        EXPECT_EQ(other.StoreKey(), group.StoreKey());
      }
      if (group.rank == 0) {
        keys.insert(group.StoreKey());
        for (int member : group.members) EXPECT_TRUE(seen.insert(member).second);
      }
    }
    EXPECT_EQ(static_cast<int>(seen.size()), c.world_size);
    const int groups = g == Group::kTensor ? 8 : g == Group::kData ? 4 : 8;
    EXPECT_EQ(static_cast<int>(keys.size()), groups) << GroupName(g);
  }
  // A tensor group is t consecutive ranks; a data group strides by t.
  const CommunicatorGroup tp = CommunicatorGroupOf(c, CoordinatesOf(c, 5), Group::kTensor);
  EXPECT_EQ(tp.members, (std::vector<int>{4, 5}));
  EXPECT_EQ(tp.StoreKey(), "gpu/nccl/tensor/2");
  const CommunicatorGroup dp = CommunicatorGroupOf(c, CoordinatesOf(c, 9), Group::kData);
  EXPECT_EQ(dp.members, (std::vector<int>{9, 11, 13, 15}));
  const CommunicatorGroup pp = CommunicatorGroupOf(c, CoordinatesOf(c, 3), Group::kPipeline);
  EXPECT_EQ(pp.members, (std::vector<int>{3, 11}));
}

}  // namespace
}  // namespace pacer::worker
