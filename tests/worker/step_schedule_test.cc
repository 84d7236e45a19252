// The worker's step schedule against the planner: the GEMM FLOPs and the
// collective bytes it issues for a plan add up to what the planner's model
// predicts for the same plan.
#include "core/step_schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "pacer/planner/cost_model.h"
#include "pacer/planner/gpu_catalog.h"
#include "pacer/planner/model_math.h"
#include "test_plans.h"

namespace pacer::worker {
namespace {

using testing::TestPlan;

TEST(PipelineOrderTest, EveryMicroBatchGoesForwardThenBackwardOnce) {
  for (auto [p, m, v] : {std::tuple{1, 4, 1}, {4, 8, 1}, {4, 2, 1}, {4, 8, 2}, {2, 6, 3}}) {
    for (int stage = 0; stage < p; ++stage) {
      const auto order = OneForwardOneBackward(stage, p, m, v);
      ASSERT_EQ(order.size(), static_cast<size_t>(2 * m * v));
      std::set<std::pair<int, int>> forwarded, backwarded;
      for (const PipelineAction& a : order) {
        const std::pair<int, int> key{a.micro_batch, a.chunk};
        ASSERT_GE(a.micro_batch, 0);
        ASSERT_LT(a.micro_batch, m);
        ASSERT_LT(a.chunk, v);
        if (a.pass == PassKind::kForward) {
          EXPECT_TRUE(forwarded.insert(key).second) << "forward twice";
        } else {
          EXPECT_TRUE(forwarded.count(key)) << "backward before forward";
          EXPECT_TRUE(backwarded.insert(key).second) << "backward twice";
        }
      }
      EXPECT_EQ(backwarded.size(), static_cast<size_t>(m * v));
    }
  }
  // The last stage of a plain 1F1B pipeline alternates from the start; the
  // first holds p - 1 micro-batches in flight (the memory model's min(p, k)).
  const auto last = OneForwardOneBackward(3, 4, 8, 1);
  EXPECT_EQ(last[0].pass, PassKind::kForward);
  EXPECT_EQ(last[1].pass, PassKind::kBackward);
  const auto first = OneForwardOneBackward(0, 4, 8, 1);
  int in_flight = 0, peak = 0;
  for (const auto& a : first) {
    in_flight += a.pass == PassKind::kForward ? 1 : -1;
    peak = std::max(peak, in_flight);
  }
  EXPECT_EQ(peak, 4);
}

TEST(RankLayoutTest, TensorGroupsAreConsecutiveRanks) {
  const WorkerConfig c = TestPlan(2, 2, 4, 1, 1, 1, 2, planner::Recompute::kNone);
  std::set<std::tuple<int, int, int>> seen;
  for (int r = 0; r < c.world_size; ++r) {
    const RankCoordinates x = CoordinatesOf(c, r);
    EXPECT_EQ(GlobalRankOf(c, x), r);
    EXPECT_TRUE(seen.insert({x.tensor_rank, x.data_rank, x.pipeline_rank}).second);
    EXPECT_EQ(r / 2, (r - x.tensor_rank) / 2);  // t consecutive ranks share a TP group
  }
}

TEST(StepScheduleTest, GemmFlopsOverAllRanksEqualThePlannersHardwareFlops) {
  for (planner::AttentionKernel a :
       {planner::AttentionKernel::kFused, planner::AttentionKernel::kUnfused}) {
    for (planner::Recompute r :
         {planner::Recompute::kNone, planner::Recompute::kSelective, planner::Recompute::kFull}) {
      for (auto [t, p, d, v, b, k] : {std::tuple{1, 1, 4, 1, 2, 3},
                                      {2, 2, 2, 1, 1, 4},
                                      {4, 2, 1, 2, 2, 4},
                                      {2, 4, 1, 2, 1, 8}}) {
        WorkerConfig c = TestPlan(t, p, d, v, 1, b, k, r);
        c.attention = a;
        // The planner's hardware FLOPs count the whole s x s matrix; what
        // the causal tiles skip: the next test.
        c.model.causal_attention = false;
        double total = 0;
        for (int rank = 0; rank < c.world_size; ++rank) {
          auto s = BuildStepSchedule(c, rank);
          ASSERT_TRUE(s.ok()) << s.status().ToString();
          total += s->GemmFlopsPerStep();
        }
        const double expected = planner::HardwareFlopsPerSequence(c.model, r, a) *
                                static_cast<double>(c.global_batch_size);
        EXPECT_NEAR(total / expected, 1.0, 1e-12)
            << planner::AttentionKernelName(a) << " " << planner::RecomputeName(r) << " t" << t
            << " p" << p << " d" << d << " v" << v;
      }
    }
  }
}

TEST(StepScheduleTest, CausalFusedAttentionSchedulesOnlyTheTilesScores) {
  for (planner::Recompute r :
       {planner::Recompute::kNone, planner::Recompute::kSelective, planner::Recompute::kFull}) {
    for (planner::AttentionKernel a :
         {planner::AttentionKernel::kFused, planner::AttentionKernel::kUnfused}) {
      WorkerConfig full = TestPlan(2, 1, 1, 1, 0, 2, 2, r);
      full.attention = a;
      full.model.causal_attention = false;
      WorkerConfig causal = full;
      causal.model.causal_attention = true;
      auto f = BuildStepSchedule(full, 0);
      auto c = BuildStepSchedule(causal, 0);
      ASSERT_TRUE(f.ok() && c.ok());
      const bool fused = a == planner::AttentionKernel::kFused;
      // s = 512 in tiles of 128 rows: (4 + 1) / 8 of the scores.
      const double share = fused ? 5.0 / 8.0 : 1.0;
      const auto& fg = f->layer.forward_gemms;
      const auto& cg = c->layer.forward_gemms;
      for (size_t i = 0; i < fg.size(); ++i) {
        const bool core = i == 1 || i == 2;  // scores and context
        EXPECT_DOUBLE_EQ(cg[i].flops(), (core ? share : 1.0) * fg[i].flops())
            << fg[i].name << " " << planner::AttentionKernelName(a);
        EXPECT_DOUBLE_EQ(cg[i].m, fg[i].m) << "the executor reads its shapes from m";
        EXPECT_DOUBLE_EQ(cg[i].batch, fg[i].batch);
      }
      ASSERT_EQ(c->layer.recompute_gemms.size(), f->layer.recompute_gemms.size());
      for (size_t i = 0; i < f->layer.recompute_gemms.size(); ++i) {
        const auto& g = f->layer.recompute_gemms[i];
        const bool core = std::string(g.name) == "scores" || std::string(g.name) == "context";
        EXPECT_DOUBLE_EQ(c->layer.recompute_gemms[i].flops(), (core ? share : 1.0) * g.flops())
            << g.name << " " << planner::AttentionKernelName(a);
      }
    }
  }
}

TEST(StepScheduleTest, TensorParallelBytesMatchThePlannersCollectiveCount) {
  // The planner counts 5 all-reduces' worth per layer and micro-batch with
  // sequence parallelism (6 with full recomputation), each over b s h
  // activations (docs/planner.md). The vocabulary-parallel tables add, per
  // micro-batch, a reduce-scatter and an all-gather of b s h on the first
  // stage, and on the last stage the same two plus an all-gather of two
  // fp32 statistics per token, which the planner leaves out.
  for (auto [r, count] : {std::pair{planner::Recompute::kNone, 5.0},
                          {planner::Recompute::kSelective, 5.0},
                          {planner::Recompute::kFull, 6.0}}) {
    const WorkerConfig c = TestPlan(4, 2, 1, 1, 0, 2, 4, r);
    const double message = 2.0 * 512 * 1024 * 2;             // b s h x 2 bytes
    const double per_layer = count * 2 * 3.0 / 4 * message;  // ring: 2(n-1)/n S each
    const double layers = 16.0 / 2, micro_batches = 4;
    const double tables = 2 * 3.0 / 4 * message;             // (n-1)/n S each
    const double stats = 3.0 / 4 * (2.0 * 512 * 2 * 4 * 4);  // b s x 2 fp32, from 4 ranks
    int firsts = 0, lasts = 0;
    for (int rank = 0; rank < c.world_size; ++rank) {
      auto s = BuildStepSchedule(c, rank);
      ASSERT_TRUE(s.ok());
      ASSERT_NE(s->holds_embedding, s->holds_logits);  // two stages
      const double extra = s->holds_embedding ? tables : tables + stats;
      EXPECT_NEAR(s->BusBytesPerStep(Group::kTensor), micro_batches * (layers * per_layer + extra),
                  1e-6)
          << rank;
      (s->holds_embedding ? firsts : lasts) += 1;
    }
    EXPECT_EQ(firsts, 4);
    EXPECT_EQ(lasts, 4);
  }
}

TEST(StepScheduleTest, DataParallelBytesFollowTheZeroStage) {
  const planner::StateBytesPerParameter bf16 = planner::StateBytes(
      planner::Precision::kBf16, planner::Optimizer::kAdamW, WorkerConfig::kFp32Gradients);
  for (int zero = 0; zero <= 3; ++zero) {
    const WorkerConfig c = TestPlan(1, 1, 8, 1, zero, 1, 4, planner::Recompute::kNone);
    auto s = BuildStepSchedule(c, 3);
    ASSERT_TRUE(s.ok());
    // A reduce-scatter or all-gather of `bytes` per parameter over 8 ranks.
    auto half = [&](double bytes) { return 7.0 / 8 * s->stage_parameters * bytes; };
    const double g = half(bf16.gradients), w = half(bf16.weights);
    ASSERT_EQ(bf16.gradients, 2 * bf16.weights) << "fp32 gradients, bf16 weights";
    // ZeRO 0 all-reduces the gradients once per step (2 halves), 1 reduce-
    // scatters them and all-gathers the weights once per step, 2 reduce-
    // scatters every micro-batch, 3 also gathers the weights twice per
    // micro-batch.
    const double expected[] = {2 * g, g + w, 4 * g + w, 4 * (2 * w + g)};
    EXPECT_NEAR(s->BusBytesPerStep(Group::kData) / expected[zero], 1.0, 1e-12) << zero;
    EXPECT_NEAR(s->optimizer_shard_parameters, s->stage_parameters / (zero >= 1 ? 8 : 1), 1e-6);
  }
}

TEST(StepScheduleTest, ParametersPerRankMatchThePlannersMemoryModel) {
  const planner::GpuType* gpu = planner::GpuCatalog::BuiltIn().Find("H100-SXM");
  for (auto [t, p] : {std::pair{1, 1}, {2, 2}, {4, 4}}) {
    const WorkerConfig c = TestPlan(t, p, 2, 1, 1, 1, 4, planner::Recompute::kSelective);
    planner::JobSpec job;
    job.model = c.model;
    job.training.global_batch_size = c.global_batch_size;
    job.training.precision = c.precision;
    planner::Layout layout;
    layout.tensor_parallel = t;
    layout.pipeline_parallel = p;
    layout.data_parallel = 2;
    layout.zero_stage = 1;
    layout.micro_batch_size = 1;
    layout.gradient_accumulation_steps = 4;
    layout.gpus_per_node = t * p * 2;
    const planner::MemoryBreakdown mem = planner::PredictMemory(job, layout, *gpu);
    auto s = BuildStepSchedule(c, 0);
    ASSERT_TRUE(s.ok());
    EXPECT_NEAR(s->stage_parameters * 2 / mem.weights_bytes, 1.0, 1e-12);
  }
}

TEST(StepScheduleTest, PipelineSendsOneActivationPerBoundaryCrossing) {
  const WorkerConfig c = TestPlan(2, 4, 1, 1, 0, 1, 8, planner::Recompute::kNone);
  // A middle stage sends every forward on and every gradient back.
  auto middle = BuildStepSchedule(c, GlobalRankOf(c, {0, 0, 1}));
  ASSERT_TRUE(middle.ok());
  EXPECT_NEAR(middle->BusBytesPerStep(Group::kPipeline), 2 * 8 * middle->p2p_bytes, 1e-6);
  EXPECT_NEAR(middle->p2p_bytes, 512.0 * 1024 * 2 / 2, 1e-9);  // s h x 2 bytes / t
  // The last stage sends only gradients back.
  auto last = BuildStepSchedule(c, GlobalRankOf(c, {0, 0, 3}));
  EXPECT_NEAR(last->BusBytesPerStep(Group::kPipeline), 8 * last->p2p_bytes, 1e-6);
}

TEST(StepScheduleTest, RejectsRanksOutsideTheWorld) {
  const WorkerConfig c = TestPlan(2, 1, 2, 1, 0, 1, 1, planner::Recompute::kNone);
  auto s = BuildStepSchedule(c, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pacer::worker
