// Published measurements the cost model is checked against: Korthikanti et
// al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
// Table 5 (A100-80GB, fp16, s = 2048, V = 51200, 8 GPUs per node with NVLink
// 600 GB/s and 8 x 200 Gb/s HDR InfiniBand). Seconds per iteration with full
// recomputation (no sequence parallelism) and with sequence parallelism plus
// selective recomputation. Shared by the accuracy test and the benchmark
// program that prints the error table for docs/benchmarks.md.
#ifndef PACER_TESTS_PLANNER_CALIBRATION_POINTS_H_
#define PACER_TESTS_PLANNER_CALIBRATION_POINTS_H_

#include <string>
#include <vector>

#include "pacer/planner/cost_model.h"
#include "pacer/planner/gpu_catalog.h"

namespace pacer::planner::testing {

struct PublishedPoint {
  std::string model;
  int hidden, ffn, heads, layers, t, p, v, gpus, batch, micro;
  double full_recompute_seconds;
  double selective_seconds;
};

inline const std::vector<PublishedPoint>& KorthikantiTable5() {
  static const std::vector<PublishedPoint> points = {
      {"22B", 6144, 24576, 64, 48, 8, 1, 1, 8, 4, 4, 1.42, 1.10},
      {"175B", 12288, 49152, 96, 96, 8, 8, 3, 64, 64, 1, 18.13, 13.75},
      {"530B", 20480, 81920, 128, 105, 8, 35, 3, 280, 280, 1, 49.05, 37.83},
      {"1T", 25600, 102400, 160, 128, 8, 64, 1, 512, 512, 1, 94.42, 71.49},
  };
  return points;
}

struct PointSetup {
  JobSpec job;
  Layout layout;
  NodePool pool;
};

// The job, layout and pool of one published run; `full` picks the full-
// recomputation column (Megatron's baseline: no sequence parallelism).
inline PointSetup SetUpPoint(const PublishedPoint& pt, bool full) {
  PointSetup s;
  ModelSpec& m = s.job.model;
  m.layers = pt.layers;
  m.hidden_size = pt.hidden;
  m.attention_heads = pt.heads;
  m.kv_heads = pt.heads;
  m.ffn_hidden_size = pt.ffn;
  m.ffn_kind = FfnKind::kGelu;
  m.vocab_size = 51200;
  m.sequence_length = 2048;
  m.tied_embeddings = true;  // Megatron's GPT shares input and output embeddings
  m.dropout = true;          // Megatron's GPT trains with dropout 0.1
  // Megatron of 2022: its own fused softmax, no FlashAttention, no TP overlap.
  s.job.training.stack.attention = AttentionKernel::kUnfused;
  s.job.training.stack.tensor_parallel_overlap = false;
  s.job.training.stack.fp32_gradients = true;  // Megatron's fp32 main gradients
  s.job.data.samples = 1e6;
  s.job.training.global_batch_size = pt.batch;
  s.job.training.precision = Precision::kFp16;
  Layout& l = s.layout;
  l.gpu_type = "A100-80GB";
  l.tensor_parallel = pt.t;
  l.pipeline_parallel = pt.p;
  l.virtual_stages = pt.v;
  l.data_parallel = pt.gpus / (pt.t * pt.p);
  l.gpus_per_node = 8;
  l.nodes = pt.gpus / 8;
  l.micro_batch_size = pt.micro;
  l.gradient_accumulation_steps = pt.batch / (pt.micro * l.data_parallel);
  l.zero_stage = 0;
  l.recompute = full ? Recompute::kFull : Recompute::kSelective;
  l.sequence_parallel = !full;
  s.pool.name = "a100";
  s.pool.gpu_type = "A100-80GB";
  s.pool.nodes = l.nodes;
  s.pool.gpus_per_node = 8;
  s.pool.free_gpus = pt.gpus;
  s.pool.network_gbps_per_node = 8 * 200;
  s.pool.nvlink_gbps = 600;
  return s;
}

}  // namespace pacer::planner::testing

#endif  // PACER_TESTS_PLANNER_CALIBRATION_POINTS_H_
