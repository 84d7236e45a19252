// Worker test fixtures: a consistent plan (WorkerConfig) for a small
// GQA/SwiGLU model, shared by the schedule and device-layout tests.
#ifndef PACER_TESTS_WORKER_TEST_PLANS_H_
#define PACER_TESTS_WORKER_TEST_PLANS_H_

#include <algorithm>
#include <cstdint>

#include "core/worker_config.h"

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

}  // namespace pacer::worker::testing

#endif  // PACER_TESTS_WORKER_TEST_PLANS_H_
