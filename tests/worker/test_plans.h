// Worker test fixtures: a consistent plan (WorkerConfig) for a small
// GQA/SwiGLU model, shared by the schedule and device-layout tests, and a
// tiny one for the tests that step the CPU backend.
#ifndef PACER_TESTS_WORKER_TEST_PLANS_H_
#define PACER_TESTS_WORKER_TEST_PLANS_H_

#include <algorithm>
#include <cstdint>

#include "core/worker_config.h"
#include "pacer/planner/cost_model.h"
#include "pacer/planner/gpu_catalog.h"

namespace pacer::worker::testing {

// t x p x d ranks, v chunks, ZeRO `zero`, micro-batch b, k micro-batches;
// 16 layers, hidden 1024, 16 heads / 4 KV heads, SwiGLU 2816, s 512, V 32000.
inline WorkerConfig TestPlan(int t, int p, int d, int v, int zero, int b, int k,
                             planner::Recompute r,
                             planner::Precision precision = planner::Precision::kBf16) {
  WorkerConfig c;
  c.tensor_parallel = t;
  c.pipeline_parallel = p;
  c.data_parallel = d;
  c.virtual_stages = v;
  c.zero_stage = zero;
  c.micro_batch_size = b;
  c.gradient_accumulation_steps = k;
  c.global_batch_size = static_cast<int64_t>(b) * k * d;
  c.world_size = t * p * d;
  c.local_world_size = std::min(8, c.world_size);
  c.nnodes = c.world_size / c.local_world_size;
  c.recompute = r;
  c.precision = precision;
  planner::ModelSpec& m = c.model;
  m.layers = 16;
  m.hidden_size = 1024;
  m.attention_heads = 16;
  m.kv_heads = 4;
  m.ffn_hidden_size = 2816;
  m.ffn_kind = planner::FfnKind::kSwiglu;
  m.vocab_size = 32000;
  m.sequence_length = 512;
  return c;
}

// The planner's memory prediction for the plan `c` describes, on an H100
// (the GPU only sets the capacity; the state bytes do not depend on it).
inline planner::MemoryBreakdown PlannerMemory(const WorkerConfig& c) {
  const planner::GpuType* gpu = planner::GpuCatalog::BuiltIn().Find("H100-SXM");
  planner::JobSpec job;
  job.model = c.model;
  job.training.global_batch_size = c.global_batch_size;
  job.training.precision = c.precision;
  job.training.optimizer = c.optimizer;
  job.training.stack.attention = c.attention;
  job.training.stack.fp32_gradients = WorkerConfig::kFp32Gradients;
  planner::Layout layout;
  layout.tensor_parallel = c.tensor_parallel;
  layout.pipeline_parallel = c.pipeline_parallel;
  layout.data_parallel = c.data_parallel;
  layout.virtual_stages = c.virtual_stages;
  layout.zero_stage = c.zero_stage;
  layout.micro_batch_size = c.micro_batch_size;
  layout.gradient_accumulation_steps = c.gradient_accumulation_steps;
  layout.recompute = c.recompute;
  layout.sequence_parallel = c.tensor_parallel > 1;  // as the search sets it
  layout.gpus_per_node = c.local_world_size;
  layout.nodes = c.nnodes;
  return planner::PredictMemory(job, layout, *gpu);
}

// A tiny model the CPU backend steps in milliseconds: t x p x d ranks,
// ZeRO `zero`, 2 layers of hidden 32, 4 heads, sequence 16, vocabulary 64,
// micro-batch 2, 2 micro-batches.
struct Plan {
  int t = 1, p = 1, d = 1, zero = 0;
  planner::Recompute recompute = planner::Recompute::kNone;
  planner::FfnKind ffn = planner::FfnKind::kGelu;
  int kv_heads = 4;
  planner::AttentionKernel attention = planner::AttentionKernel::kFused;
};

inline WorkerConfig TinyConfig(const Plan& plan) {
  WorkerConfig c;
  c.tensor_parallel = plan.t;
  c.pipeline_parallel = plan.p;
  c.data_parallel = plan.d;
  c.world_size = plan.t * plan.p * plan.d;
  c.local_world_size = c.world_size;
  c.nnodes = 1;
  c.zero_stage = plan.zero;
  c.micro_batch_size = 2;
  c.gradient_accumulation_steps = 2;
  c.global_batch_size = 2 * 2 * plan.d;
  c.recompute = plan.recompute;
  c.attention = plan.attention;
  c.precision = planner::Precision::kBf16;
  c.model.layers = 2;
  c.model.hidden_size = 32;
  c.model.attention_heads = 4;
  c.model.kv_heads = plan.kv_heads;
  c.model.ffn_hidden_size = 64;
  c.model.ffn_kind = plan.ffn;
  c.model.vocab_size = 64;
  c.model.sequence_length = 16;
  return c;
}

// SwiGLU with grouped-query attention (2 K/V heads for 4 query heads).
inline Plan SwigluGqa(planner::Recompute r) {
  Plan plan;
  plan.recompute = r;
  plan.ffn = planner::FfnKind::kSwiglu;
  plan.kv_heads = 2;
  return plan;
}

}  // namespace pacer::worker::testing

#endif  // PACER_TESTS_WORKER_TEST_PLANS_H_
