// The controller -> worker contract: the environment the controller builds
// for each node is read back by pacer-worker's own parser to the same plan.
#include "reconcile/worker_env.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/worker_config.h"
#include "pacer/planner/gpu_catalog.h"
#include "pacer/planner/job_parser.h"

namespace pacer::controller {
namespace {

LaunchSpec TwoNodeLaunch() {
  StatusOr<planner::JobSpec> job = planner::ParseTrainJob(R"(
apiVersion: pacer.dev/v1alpha1
kind: TrainJob
metadata: {name: llama, namespace: research}
spec:
  model: {parameters: 6.7e9, layers: 32, hiddenSize: 4096, attentionHeads: 32, kvHeads: 8,
          ffnHiddenSize: 11008, ffnKind: swiglu, vocabSize: 32000, sequenceLength: 4096}
  data: {tokens: 1e10}
  training: {globalBatchSize: 512, precision: bf16, optimizer: adamw}
)");
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  LaunchSpec launch;
  launch.job = JobRef{"research", "llama", "uid-1", std::nullopt, std::nullopt};
  launch.spec = *job;
  planner::Layout& l = launch.plan.layout;
  l.gpu_type = "H100-SXM";
  l.pool = "h100";
  l.nodes = 2;
  l.gpus_per_node = 8;
  l.tensor_parallel = 2;
  l.pipeline_parallel = 2;
  l.data_parallel = 4;
  l.virtual_stages = 2;
  l.zero_stage = 1;
  l.micro_batch_size = 2;
  l.gradient_accumulation_steps = 64;
  l.recompute = planner::Recompute::kSelective;
  launch.plan.step.step_seconds = 7.5;
  launch.total_steps = TotalSteps(launch.spec);
  launch.checkpoint_interval_steps = 100;
  return launch;
}

TEST(WorkerEnvTest, TheWorkerReadsBackThePlanOnEveryNode) {
  const LaunchSpec launch = TwoNodeLaunch();
  WorkerEnvOptions options;
  options.master_addr = "llama-a1-0.llama-workers.research.svc";
  options.checkpoint_dir = "/checkpoints";
  for (int node = 0; node < 2; ++node) {
    const auto env = WorkerEnvironment(launch, node, options);
    StatusOr<worker::WorkerConfig> c = worker::ConfigFromEnvironment([&env](const char* name) {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->node_rank, node);
    EXPECT_EQ(c->rank, node * 8);
    EXPECT_EQ(c->world_size, 16);
    EXPECT_EQ(c->nnodes, 2);
    EXPECT_EQ(c->local_world_size, 8);
    EXPECT_EQ(c->master_addr, options.master_addr);
    EXPECT_EQ(c->tensor_parallel, 2);
    EXPECT_EQ(c->pipeline_parallel, 2);
    EXPECT_EQ(c->data_parallel, 4);
    EXPECT_EQ(c->virtual_stages, 2);
    EXPECT_EQ(c->zero_stage, 1);
    EXPECT_EQ(c->micro_batch_size * c->gradient_accumulation_steps * c->data_parallel, 512);
    EXPECT_EQ(c->global_batch_size, 512);
    EXPECT_EQ(c->total_steps, launch.total_steps);
    EXPECT_EQ(c->recompute, planner::Recompute::kSelective);
    EXPECT_EQ(c->attention, planner::AttentionKernel::kFused) << "the planner's default";
    EXPECT_EQ(c->model.kv_heads, 8);
    EXPECT_EQ(c->model.ffn_kind, planner::FfnKind::kSwiglu);
    EXPECT_EQ(c->checkpoint_dir, "/checkpoints");
    EXPECT_EQ(c->checkpoint_interval_steps, 100);
    EXPECT_EQ(c->job_name, "llama");
    EXPECT_EQ(c->job_namespace, "research");
    EXPECT_EQ(c->gpu_type, "H100-SXM");
    // Its metrics carry the attempt, so a relaunch's measurement is its own.
    EXPECT_EQ(c->attempt, launch.attempt);
    ASSERT_TRUE(c->predicted_step_seconds.has_value());
    EXPECT_DOUBLE_EQ(*c->predicted_step_seconds, 7.5);
    // torchrun's spellings are there for a user's own PyTorch image.
    EXPECT_EQ(env.at("PET_NNODES"), "2");
    EXPECT_EQ(env.at("PET_NPROC_PER_NODE"), "8");
  }
}

TEST(WorkerEnvTest, TheWorkerRunsThePlansAttentionKernel) {
  LaunchSpec launch = TwoNodeLaunch();
  launch.spec.training.stack.attention = planner::AttentionKernel::kUnfused;
  const auto env = WorkerEnvironment(launch, 0, WorkerEnvOptions{});
  EXPECT_EQ(env.at("PACER_ATTENTION_KERNEL"), "unfused");
  StatusOr<worker::WorkerConfig> c = worker::ConfigFromEnvironment([&env](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->attention, planner::AttentionKernel::kUnfused);
}

TEST(WorkerEnvTest, TheWorkerRunsTheModelsAttentionMask) {
  for (const bool causal : {true, false}) {
    LaunchSpec launch = TwoNodeLaunch();
    launch.spec.model.causal_attention = causal;
    const auto env = WorkerEnvironment(launch, 0, WorkerEnvOptions{});
    EXPECT_EQ(env.at("PACER_MODEL_CAUSAL_ATTENTION"), causal ? "true" : "false");
    StatusOr<worker::WorkerConfig> c = worker::ConfigFromEnvironment([&env](const char* name) {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->model.causal_attention, causal);
  }
}

// The planner counts one embedding table for a tied model on one pipeline
// stage; the workers ran two (the variable did not exist), so their memory
// and step time were not the plan's.
TEST(WorkerEnvTest, TheWorkerRunsTheModelsTiedEmbeddings) {
  for (const bool tied : {true, false}) {
    LaunchSpec launch = TwoNodeLaunch();
    launch.spec.model.tied_embeddings = tied;
    const auto env = WorkerEnvironment(launch, 0, WorkerEnvOptions{});
    StatusOr<worker::WorkerConfig> c = worker::ConfigFromEnvironment([&env](const char* name) {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->model.tied_embeddings, tied);
  }
}

TEST(WorkerEnvTest, TotalStepsRoundUpAndCheckpointIntervalFollowsThePlan) {
  LaunchSpec launch = TwoNodeLaunch();
  // 1e10 tokens / 4096 per sequence = 2441407 sequences (rounded up) / 512.
  EXPECT_EQ(TotalSteps(launch.spec), 4769);
  launch.plan.total.checkpoint_interval_seconds = 3600;
  EXPECT_EQ(CheckpointIntervalSteps(launch.plan), 480);
  launch.plan.total.checkpoint_interval_seconds = 0;
  EXPECT_EQ(CheckpointIntervalSteps(launch.plan), 0);
}

// The spec hash the pods carry (pacer.dev/spec-hash) changes with what the
// workers run and only with that: a planning-only edit must not stop a
// running job, and a changed canonical form stops every running job once on
// upgrade, so its value is pinned.
TEST(WorkerEnvTest, TheSpecHashFollowsWhatTheWorkersRun) {
  const planner::JobSpec base = TwoNodeLaunch().spec;
  const std::string hash = WorkerSpecHash(base);
  // Pinned: FNV-1a 64 of "4769\x1f512\x1fbf16\x1fadamw\x1ffused\x1f32\x1f4096\x1f32\x1f8\x1f
  // 11008\x1f32000\x1f4096\x1fswiglu\x1fcausal\x1funtied\x1f\x1f0\x1f0\x1f\x1f", computed
  // apart from this code (Python, the FNV reference constants).
  EXPECT_EQ(hash, "015adbc1cd9699fe");
  EXPECT_EQ(hash.size(), 16u);

  planner::JobSpec same = base;
  same.max_duration_seconds = 3600;  // planning only
  same.deadline_unix_seconds = 1'900'000'000;
  same.resources.min_gpus = 64;
  same.parallelism.tensor_parallel = 4;
  same.replan.enabled = false;
  same.checkpoint.interval_seconds = 600;
  same.objective = planner::Objective::kTime;
  same.data.tokens = *base.data.tokens + 1;  // the same step total
  EXPECT_EQ(TotalSteps(same), TotalSteps(base));
  EXPECT_EQ(WorkerSpecHash(same), hash);

  auto differs = [&](const std::function<void(planner::JobSpec&)>& edit) {
    planner::JobSpec edited = base;
    edit(edited);
    return WorkerSpecHash(edited) != hash;
  };
  EXPECT_TRUE(differs([](planner::JobSpec& j) { j.data.tokens = 2e10; }));
  EXPECT_TRUE(differs([](planner::JobSpec& j) { j.training.global_batch_size = 1024; }));
  EXPECT_TRUE(
      differs([](planner::JobSpec& j) { j.training.precision = planner::Precision::kFp8; }));
  EXPECT_TRUE(differs([](planner::JobSpec& j) { j.model.sequence_length = 2048; }));
  EXPECT_TRUE(differs([](planner::JobSpec& j) { j.model.tied_embeddings = true; }));
  EXPECT_TRUE(differs([](planner::JobSpec& j) { j.worker.image = "registry.example/w:2"; }));
  EXPECT_TRUE(differs([](planner::JobSpec& j) { j.worker.env.push_back({"A", "1"}); }));
  EXPECT_TRUE(differs([](planner::JobSpec& j) { j.worker.command = {"train", "--x"}; }));
  EXPECT_TRUE(differs([](planner::JobSpec& j) { j.checkpoint.volume_claim_name = "ckpt"; }));
  // Field boundaries count: one argument "a b" is not two.
  planner::JobSpec one = base;
  one.worker.command = {"ab"};
  planner::JobSpec two = base;
  two.worker.command = {"a", "b"};
  EXPECT_NE(WorkerSpecHash(one), WorkerSpecHash(two));
}

}  // namespace
}  // namespace pacer::controller
