// The cost model. docs/planner.md gives every formula with its source; the
// comments here say why a term has the shape it has.
#include "pacer/planner/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "cost_model_internal.h"
#include "pacer/planner/layer_shapes.h"
#include "pacer/planner/model_math.h"

namespace pacer::planner {
namespace {

// PCIe Gen4 x16, one direction: the GPU-to-GPU path on nodes without NVLink.
constexpr double kPcieBytesPerSecond = 32e9;

// A GEMM at the linear layers' precision (fp8 when the job trains in fp8).
double GemmSeconds(const internal::PoolContext& ctx, const GemmShape& g) {
  const double flops = g.flops();
  return flops / (ctx.peak_flops * ctx.gemm_efficiency * GemmSizeFactor(flops));
}

// A GEMM that stays 16-bit (attention scores, logits) in every recipe.
double Gemm16Seconds(const internal::PoolContext& ctx, const GemmShape& g) {
  const double flops = g.flops();
  return flops / (ctx.peak16_flops * ctx.gemm16_efficiency * GemmSizeFactor(flops));
}

// Forward time of one layer's linear GEMMs (QKV, projection, MLP in and out)
// for one micro-batch on one GPU under t-way tensor parallelism.
double LinearForwardSeconds(const internal::PoolContext& ctx, int b, int t) {
  const std::array<GemmShape, 6> gemms = LayerForwardGemms(ctx.job->model, b, t);
  double seconds = 0;
  for (int i : {0, 3, 4, 5}) seconds += GemmSeconds(ctx, gemms[static_cast<size_t>(i)]);
  return seconds;
}

// The attention core (scores and probabilities x V) as explicit batched GEMMs.
double UnfusedAttentionForwardSeconds(const internal::PoolContext& ctx, int b, int t) {
  double seconds = 0;
  for (const GemmShape& g : AttentionCoreGemms(ctx.job->model, b, t)) {
    seconds += Gemm16Seconds(ctx, g);
  }
  return seconds;
}

// A fused kernel (FlashAttention): under a causal mask it skips half of
// the s x s tiles; it runs at its own efficiency.
double FusedAttentionForwardSeconds(const internal::PoolContext& ctx, int b, int t) {
  double flops = 0;
  for (const GemmShape& g : AttentionCoreGemms(ctx.job->model, b, t)) flops += g.flops();
  const double work = ctx.job->model.causal_attention ? 0.5 : 1.0;
  return work * flops / (ctx.peak16_flops * ctx.constants.flash_attention_efficiency);
}
// FlashAttention's backward recomputes the scores: 5 GEMM-sized passes
// against the forward's 2.
constexpr double kFusedAttentionBackwardRatio = 2.5;

// Korthikanti's score term (softmax output, dropout mask and output:
// 5 a s^2 b bytes per layer; 2 without dropout), the part selective
// recomputation or a fused kernel drops.
double AttentionScoreBytes(const ModelSpec& m, int b, int t) {
  // Without attention dropout there is no mask and no dropout output: 2.
  return (m.dropout ? 5.0 : 2.0) * m.attention_heads * static_cast<double>(m.sequence_length) *
         m.sequence_length * b / t;
}

// One tensor-parallel rank's rows of a V x h table, the vocabulary padded
// to a multiple of t (VocabShardRows).
double TableParametersPerRank(const ModelSpec& m, int t) {
  return static_cast<double>(VocabShardRows(m, t)) * m.hidden_size;
}

// Parameters held by one GPU of the most loaded pipeline stage: its layers
// and one V x h matrix (input embedding on the first stage, output projection
// on the last; both on a single stage unless tied), split t ways.
double StageParameters(const internal::PoolContext& ctx, const Layout& l) {
  const ModelSpec& m = ctx.job->model;
  const double layers_per_stage = static_cast<double>(m.layers) / l.pipeline_parallel;
  const double tables = (l.pipeline_parallel == 1 && !m.tied_embeddings) ? 2.0 : 1.0;
  return layers_per_stage * ctx.layer_parameters / l.tensor_parallel +
         tables * TableParametersPerRank(m, l.tensor_parallel);
}

// The mean work lost to a failure at a uniformly random instant of a run of
// `run_seconds` checkpointed every `interval_seconds`: the time since the
// last checkpoint. Whole intervals lose half an interval on average, the
// last partial one half of itself.
double MeanWorkLostSeconds(double run_seconds, double interval_seconds) {
  if (!(run_seconds > 0) || !(interval_seconds > 0)) return 0;
  const double whole = std::floor(run_seconds / interval_seconds);
  const double rest = run_seconds - whole * interval_seconds;
  return (whole * interval_seconds * interval_seconds + rest * rest) / (2.0 * run_seconds);
}

}  // namespace

double GemmSizeFactor(double flops_per_gemm) {
  // Calculon's prior (0.95 at >= 128 GFLOP, 0.9 at >= 16, 0.6 at >= 1, 0.1
  // below), normalised to 1 for large GEMMs and interpolated on log(FLOPs) so
  // that the search sees no cliffs between neighbouring micro-batch sizes.
  struct Point {
    double gflop, factor;
  };
  static constexpr Point kPoints[] = {
      {0.01, 0.1 / 0.95}, {1, 0.6 / 0.95}, {16, 0.9 / 0.95}, {128, 1.0}};
  const double gflop = flops_per_gemm / 1e9;
  if (gflop >= kPoints[3].gflop) return 1.0;
  if (gflop <= kPoints[0].gflop) return kPoints[0].factor;
  for (int i = 0; i < 3; ++i) {
    const Point a = kPoints[i], b = kPoints[i + 1];
    if (gflop <= b.gflop) {
      const double x = std::log(gflop / a.gflop) / std::log(b.gflop / a.gflop);
      return a.factor + x * (b.factor - a.factor);
    }
  }
  return 1.0;
}

StateBytesPerParameter StateBytes(Precision precision, Optimizer optimizer, bool fp32_gradients) {
  StateBytesPerParameter s;
  if (IsMixedPrecision(precision)) {
    // 16-bit weights; gradients in fp32 (Megatron's main gradients) or 16
    // bits; the optimizer keeps an fp32 master copy (4) plus its fp32
    // moments (ZeRO paper's K = 12 for Adam).
    s.weights = 2;
    s.gradients = fp32_gradients ? 4 : 2;
    switch (optimizer) {
      case Optimizer::kAdamW:
      case Optimizer::kAdam:
        s.optimizer = 12;
        break;
      case Optimizer::kSgdMomentum:
        s.optimizer = 8;
        break;
      case Optimizer::kSgd:
      case Optimizer::kAdafactor:
        s.optimizer = 4;
        break;  // factored moments ~ 0
    }
  } else {
    s.weights = 4;
    s.gradients = 4;
    switch (optimizer) {
      case Optimizer::kAdamW:
      case Optimizer::kAdam:
        s.optimizer = 8;
        break;
      case Optimizer::kSgdMomentum:
        s.optimizer = 4;
        break;
      case Optimizer::kSgd:
      case Optimizer::kAdafactor:
        s.optimizer = 0;
        break;
    }
  }
  return s;
}

ShardedStateBytes ShardedState(double parameters, StateBytesPerParameter per, int zero_stage,
                               int data_parallel) {
  const double d = std::max(1, data_parallel);
  ShardedStateBytes out;
  out.weights_bytes = per.weights * parameters / (zero_stage >= 3 ? d : 1);
  out.gradients_bytes = per.gradients * parameters / (zero_stage >= 2 ? d : 1);
  out.optimizer_bytes = per.optimizer * parameters / (zero_stage >= 1 ? d : 1);
  return out;
}

double LayerActivationBytes(const ModelSpec& m, int micro_batch_size, int tensor_parallel,
                            bool sequence_parallel, Recompute recompute,
                            AttentionKernel attention) {
  const double sbh = static_cast<double>(m.sequence_length) * micro_batch_size * m.hidden_size;
  const double t = tensor_parallel;
  const bool sp = sequence_parallel && tensor_parallel > 1;
  if (recompute == Recompute::kFull) return 2.0 * sbh / (sp ? t : 1.0);  // the layer's input only
  // Korthikanti's 34 sbh split into what tensor parallelism replicates (norm
  // inputs, attention and MLP inputs: 8, plus two 1-byte dropout masks when
  // the model uses dropout: 10) and what it shards (Q, K, V, attention
  // output, MLP hidden activations: 24 for MHA with a 4h GELU MLP),
  // generalised to GQA and SwiGLU.
  const double h = m.hidden_size;
  const double kv_ratio = static_cast<double>(m.kv_heads) / m.attention_heads;
  const double replicated = m.dropout ? 10.0 : 8.0;
  const double attention_sharded = 4.0 + 4.0 * kv_ratio;
  const double mlp_sharded = (m.ffn_kind == FfnKind::kSwiglu ? 6.0 : 4.0) * m.ffn_hidden_size / h;
  const double sharded = attention_sharded + mlp_sharded;
  double bytes = sbh * (sp ? (replicated + sharded) / t : replicated + sharded / t);
  if (recompute == Recompute::kNone && attention == AttentionKernel::kUnfused) {
    bytes += AttentionScoreBytes(m, micro_batch_size, tensor_parallel);
  }
  return bytes;
}

namespace internal {

PoolContext MakePoolContext(const JobSpec& job, const NodePool& pool, const GpuType& gpu,
                            const GpuCalibration* cal, const ModelConstants& c) {
  PoolContext ctx;
  ctx.job = &job;
  ctx.pool = &pool;
  ctx.gpu = &gpu;
  ctx.constants = c;
  const Precision precision = job.training.precision;
  // 16-bit GEMMs: the calibration's measurement, else the catalog's, else
  // the model's default.
  const double gemm16 = (cal && cal->gemm_efficiency) ? *cal->gemm_efficiency
                        : gpu.gemm_efficiency > 0     ? gpu.gemm_efficiency
                                                      : c.gemm_efficiency;
  if (precision == Precision::kFp8) {
    ctx.peak_flops = gpu.PeakFlops(Precision::kFp8);
    ctx.gemm_efficiency =
        gpu.fp8_gemm_efficiency > 0 ? gpu.fp8_gemm_efficiency : c.fp8_gemm_efficiency;
    // The 16-bit parts (attention, logits) in bf16, or fp16 on a GPU
    // without bf16 (a new type may give only fp16TFLOPS).
    ctx.peak16_flops = std::max(gpu.PeakFlops(Precision::kBf16), gpu.PeakFlops(Precision::kFp16));
    ctx.gemm16_efficiency = gemm16;
  } else {
    ctx.peak_flops = gpu.PeakFlops(precision);
    ctx.gemm_efficiency = gemm16;
    ctx.peak16_flops = ctx.peak_flops;
    ctx.gemm16_efficiency = gemm16;
  }
  ctx.hbm_bytes_per_second = (cal && cal->memory_bandwidth_gbps)
                                 ? *cal->memory_bandwidth_gbps * 1e9
                                 : gpu.hbm_gbps * 1e9 * c.hbm_efficiency;
  const double nvlink_gbps = pool.nvlink_gbps > 0 ? pool.nvlink_gbps : gpu.nvlink_gbps;
  // Datasheet NVLink figures are bidirectional; a ring uses one direction.
  const double link_unidirectional = nvlink_gbps > 0 ? nvlink_gbps * 1e9 / 2 : kPcieBytesPerSecond;
  ctx.nvlink_busbw = (cal && cal->intra_node_busbw_gbps)
                         ? *cal->intra_node_busbw_gbps * 1e9
                         : link_unidirectional * c.nvlink_collective_efficiency;
  // Tensor-parallel collectives reach a fixed share of what large messages do.
  ctx.tp_busbw = ctx.nvlink_busbw * (c.tp_link_efficiency / c.nvlink_collective_efficiency);
  // All NICs of a node (NCCL runs a channel per NIC); a calibration measures
  // the per-GPU share.
  if (cal && cal->inter_node_busbw_gbps) {
    ctx.network_busbw_per_node = *cal->inter_node_busbw_gbps * 1e9 * pool.gpus_per_node;
    ctx.calibrated_network = true;
  } else {
    ctx.network_busbw_per_node = pool.network_gbps_per_node * 1e9 / 8 * c.network_efficiency;
  }
  ctx.step_time_ratio = (cal && cal->step_time_ratio) ? *cal->step_time_ratio : 1.0;
  ctx.activation_bytes = IsMixedPrecision(precision) ? 2.0 : 4.0;
  ctx.state = StateBytes(precision, job.training.optimizer, job.training.stack.fp32_gradients);
  ctx.layer_parameters = LayerParameters(job.model);
  ctx.model_flops_per_sequence = ModelFlopsPerSequence(job.model);
  ctx.optimizer_steps = static_cast<int64_t>(OptimizerSteps(job));  // <= 1e12 (job_parser.cc)
  ctx.price_per_gpu_hour =
      pool.price_per_gpu_hour > 0 ? pool.price_per_gpu_hour : gpu.price_per_gpu_hour;
  return ctx;
}

MemoryBreakdown PredictMemory(const PoolContext& ctx, const Layout& l) {
  const ModelSpec& m = ctx.job->model;
  const ModelConstants& c = ctx.constants;
  MemoryBreakdown mem;
  const ShardedStateBytes state =
      ShardedState(StageParameters(ctx, l), ctx.state, l.zero_stage, l.data_parallel);
  mem.weights_bytes = state.weights_bytes;
  mem.gradients_bytes = state.gradients_bytes;
  mem.optimizer_bytes = state.optimizer_bytes;

  const double element_scale = ctx.activation_bytes / 2.0;  // formulas assume 16-bit
  const AttentionKernel attention = ctx.job->training.stack.attention;
  const double per_layer =
      element_scale * LayerActivationBytes(m, l.micro_batch_size, l.tensor_parallel,
                                           l.sequence_parallel, l.recompute, attention);
  const double layers_per_stage = static_cast<double>(m.layers) / l.pipeline_parallel;
  // 1F1B: the first stage holds up to p micro-batches in flight; interleaving
  // multiplies that by 1 + (p-1)/(p v) (Korthikanti 2022, section 4.2.3).
  const int p = l.pipeline_parallel;
  const double in_flight =
      static_cast<double>(std::min<int64_t>(p, l.gradient_accumulation_steps)) *
      (l.virtual_stages > 1 ? 1.0 + (p - 1.0) / (p * l.virtual_stages) : 1.0);
  double first_stage = per_layer * layers_per_stage * in_flight;
  if (l.recompute == Recompute::kFull) {
    // During backward one layer's full activations are live again.
    first_stage +=
        element_scale * LayerActivationBytes(m, l.micro_batch_size, l.tensor_parallel,
                                             l.sequence_parallel, Recompute::kNone, attention);
  }
  // The last stage holds one micro-batch of logits: 16-bit logits plus the
  // fp32 copy the cross-entropy works on, vocabulary split t ways.
  const double logits = static_cast<double>(m.sequence_length) * l.micro_batch_size *
                        static_cast<double>(VocabShardRows(m, l.tensor_parallel)) *
                        (ctx.activation_bytes + 4.0);
  const double last_stage = (p == 1 ? first_stage : per_layer * layers_per_stage) + logits;
  if (p == 1 || first_stage >= last_stage) {
    mem.activations_bytes = first_stage;
    mem.logits_bytes = p == 1 ? logits : 0;
  } else {
    mem.activations_bytes = per_layer * layers_per_stage;
    mem.logits_bytes = logits;
  }
  if (l.zero_stage >= 3 && l.data_parallel > 1) {
    // FSDP gathers one unit (a layer or a V x h table) at a time and
    // prefetches the next, so the unit in use and the one ahead hold full
    // weights; the unit in backward holds its unsharded gradients plus the
    // 1/d shard its reduce-scatter writes. A tied table on a single stage
    // serves the first and the last op of each pass: it stays gathered
    // through the forward and its gradients through the backward.
    const double layer = ctx.layer_parameters / l.tensor_parallel;
    const double table = TableParametersPerRank(m, l.tensor_parallel);
    const double unit = std::max(layer, table);
    const double tied = (m.tied_embeddings && l.pipeline_parallel == 1) ? table : 0.0;
    mem.buffers_bytes = (unit + layer + tied) * ctx.state.weights +
                        (unit * (1.0 + 1.0 / l.data_parallel) + tied) * ctx.state.gradients;
  }
  mem.capacity_bytes = ctx.gpu->memory_bytes();
  // The job's own margin (raised by the controller after out-of-memory
  // failures) is held back on top of the model's reserve.
  mem.reserve_bytes =
      c.cuda_context_bytes +
      (c.fragmentation_fraction + ctx.job->memory_margin_fraction) * mem.capacity_bytes;
  return mem;
}

// The communicator of one parallel dimension as the cost model times it.
CollectiveGroup MakeGroup(const PoolContext& ctx, int ranks, int ranks_per_node) {
  const ModelConstants& c = ctx.constants;
  CollectiveGroup g;
  g.ranks = ranks;
  g.ranks_per_node = std::max(1, std::min(ranks, ranks_per_node));
  g.intra_node_busbw_bytes_per_second = ctx.nvlink_busbw;
  // The group's share of the node's NICs: its ranks on the node out of all
  // the node's GPUs (the other GPUs run their own groups at the same time).
  g.inter_node_busbw_bytes_per_second =
      ctx.network_busbw_per_node * g.ranks_per_node / std::max(1, ctx.pool->gpus_per_node);
  g.intra_node_hop_seconds = c.nvlink_hop_seconds;
  g.inter_node_hop_seconds = c.network_hop_seconds;
  g.base_seconds = c.collective_base_seconds;
  return g;
}

void EvaluateInto(const PoolContext& ctx, const Layout& l, Evaluation* out) {
  const ModelSpec& m = ctx.job->model;
  const ModelConstants& c = ctx.constants;
  const StackSpec& stack = ctx.job->training.stack;
  const int t = l.tensor_parallel, p = l.pipeline_parallel, d = l.data_parallel;
  const int b = l.micro_batch_size;
  const double k = static_cast<double>(l.gradient_accumulation_steps);
  const double v = l.virtual_stages;
  const bool sp = l.sequence_parallel && t > 1;
  const bool fused = stack.attention == AttentionKernel::kFused;
  const double layers_per_stage = static_cast<double>(m.layers) / p;
  const double launch = c.kernel_launch_seconds;
  const double kernels_fwd = c.kernels_per_layer_forward;

  out->memory = PredictMemory(ctx, l);
  StepTimeBreakdown& st = out->step;
  st.attention = stack.attention;

  // --- one micro-batch through one layer on one GPU ---
  const double linear_fwd = LinearForwardSeconds(ctx, b, t);
  // Memory-bound elementwise work moves a multiple of what the layer would
  // store with nothing recomputed (the score matrix only when unfused).
  const double element_scale = ctx.activation_bytes / 2.0;
  const double act_bytes =
      element_scale * LayerActivationBytes(m, b, t, sp, Recompute::kNone, stack.attention);
  double elementwise_fwd = c.elementwise_traffic_factor * act_bytes / ctx.hbm_bytes_per_second;
  if (ctx.job->training.precision == Precision::kFp8) {
    // Casting each linear layer's input to fp8 reads 2 and writes 1 byte per
    // element; current and blockwise scaling first read it once more for
    // its amax (delayed scaling reuses the history).
    const double inputs = static_cast<double>(b) * m.sequence_length *
                          (3.0 * m.hidden_size + static_cast<double>(m.ffn_hidden_size)) / t;
    const double bytes_per_element = stack.fp8_recipe == Fp8Recipe::kDelayed ? 3.0 : 5.0;
    elementwise_fwd += inputs * bytes_per_element / ctx.hbm_bytes_per_second;
  }
  double attention_fwd = 0, attention_bwd = 0;
  if (fused) {
    attention_fwd = FusedAttentionForwardSeconds(ctx, b, t);
    attention_bwd = kFusedAttentionBackwardRatio * attention_fwd;
  } else {
    attention_fwd = UnfusedAttentionForwardSeconds(ctx, b, t);
    attention_bwd = 2.0 * attention_fwd;
  }
  // No kernel is shorter than a launch: the floor of a layer's forward is
  // its kernel count in launches, backward twice that.
  const double fwd = std::max(linear_fwd + attention_fwd + elementwise_fwd, kernels_fwd * launch);
  const double bwd =
      std::max(2.0 * (linear_fwd + elementwise_fwd) + attention_bwd, 2.0 * kernels_fwd * launch);
  double recompute = 0;
  if (l.recompute == Recompute::kFull) {
    recompute = fwd;
  } else if (l.recompute == Recompute::kSelective && !fused) {
    // A fused kernel already recomputes its scores in the backward pass.
    recompute = attention_fwd + c.elementwise_traffic_factor * element_scale *
                                    AttentionScoreBytes(m, b, t) / ctx.hbm_bytes_per_second;
  }
  // Tensor parallelism: 2 all-reduces of b s h activations forward and 2
  // backward (Megatron-LM); full recomputation repeats the forward two; with
  // sequence parallelism each becomes reduce-scatter + all-gather (same
  // volume) and backward re-gathers the inputs of the weight gradients (one
  // more all-reduce's worth). With overlap only a share stays exposed.
  double tp_comm = 0;
  if (t > 1) {
    const double message =
        b * static_cast<double>(m.sequence_length) * m.hidden_size * ctx.activation_bytes;
    CollectiveGroup group = MakeGroup(ctx, t, t);
    group.intra_node_busbw_bytes_per_second = ctx.tp_busbw;
    st.tp_collective = AllReduceTime(message, group);
    const double collectives = l.recompute == Recompute::kFull ? 6.0 : (sp ? 5.0 : 4.0);
    tp_comm = collectives * st.tp_collective.seconds;
  }
  st.tp_overlap = t > 1 && stack.tensor_parallel_overlap;
  const double tp_exposed = st.tp_overlap ? c.tp_overlap_exposed_fraction * tp_comm : tp_comm;

  // --- one micro-batch through one pipeline stage ---
  const double logits = 3.0 * std::max(Gemm16Seconds(ctx, LogitsGemm(m, b, t)), launch);
  double p2p = 0;
  if (p > 1) {
    // Forward activations and backward gradients cross each stage boundary
    // once per model chunk; with sequence parallelism each TP rank sends its
    // 1/t share (Megatron's scatter-gather). Across nodes each GPU sends
    // over its own NIC. Megatron's rank order (and the worker's,
    // step_schedule.cc) puts pipeline stages outermost: a stage is t x d
    // consecutive ranks, so on more than one node some stage boundary is a
    // node boundary (t = 1, p = 2, d = 8 on 8-GPU nodes: one stage a node).
    const double message = b * static_cast<double>(m.sequence_length) * m.hidden_size *
                           ctx.activation_bytes / (sp ? t : 1);
    const bool crosses_nodes = l.nodes > 1;
    const double bw =
        crosses_nodes ? ctx.network_busbw_per_node / ctx.pool->gpus_per_node : ctx.nvlink_busbw;
    const double hop = crosses_nodes ? c.network_hop_seconds : c.nvlink_hop_seconds;
    p2p = 2.0 * v * (message / bw + hop + c.collective_base_seconds);
  }
  // FSDP-style sharding waits on its per-layer collectives once per layer
  // and micro-batch (ModelConstants::sharded_layer_overhead_seconds).
  const double sharded_overhead =
      (l.zero_stage >= 2 && d > 1) ? c.sharded_layer_overhead_seconds : 0.0;
  const double per_layer = fwd + bwd + recompute + tp_exposed + sharded_overhead;
  const double stage_microbatch = layers_per_stage * per_layer + p2p;

  st.compute_seconds = k * (layers_per_stage * (fwd + bwd) + logits);
  st.sharding_overhead_seconds = k * layers_per_stage * sharded_overhead;
  st.attention_seconds = k * layers_per_stage * (attention_fwd + attention_bwd);
  st.recompute_seconds = k * layers_per_stage * recompute;
  st.tp_comm_seconds = k * layers_per_stage * tp_comm;
  st.tp_exposed_seconds = k * layers_per_stage * tp_exposed;
  st.pp_p2p_seconds = k * p2p;
  // Fill and drain: (p-1)/v micro-batch slots (GPipe/1F1B; interleaved, Narayanan 2021).
  st.pp_bubble_seconds = (p - 1.0) / v * stage_microbatch;

  // --- data-parallel gradient collectives ---
  // Megatron's rank order puts tensor parallelism innermost, then data
  // parallelism: a node holds gpus_per_node / t ranks of each DP group.
  const double stage_params = StageParameters(ctx, l);
  st.dp_comm_seconds = 0;
  st.dp_exposed_seconds = 0;
  st.dp_overlap = d > 1 && stack.data_parallel_overlap;
  double dp_latency = 0;
  if (d > 1) {
    const CollectiveGroup group = MakeGroup(ctx, d, std::max(1, l.gpus_per_node / t));
    // Gradients move at their own precision (fp32 main gradients under a
    // 16-bit plan by default), the weights ZeRO gathers at theirs (16 bits):
    // sized both at gradient bytes, a ZeRO-3 step's collectives with fp32
    // gradients were timed 2x the 16-bit ones, not (2 + 2 + 4) / 6 = 1.33x.
    const double grad_bytes = stage_params * ctx.state.gradients;
    const double weight_bytes = stage_params * ctx.state.weights;
    const CollectiveTime allreduce = AllReduceTime(grad_bytes, group);
    const CollectiveTime shard = ReduceScatterTime(grad_bytes, group);
    const CollectiveTime gather = AllGatherTime(weight_bytes, group);
    const double last_backward = layers_per_stage * bwd;
    const double overlappable = stack.data_parallel_overlap ? 1.0 : 0.0;
    switch (l.zero_stage) {
      case 0:
      case 1: {
        // All-reduce once per step, in buckets overlapped with the last
        // backward. ZeRO-1 (Megatron's distributed optimizer) reduce-scatters
        // the gradients and all-gathers the updated weights instead: the
        // all-reduce's bandwidth term with half its volume at weight bytes.
        CollectiveTime step = allreduce;
        if (l.zero_stage == 1 && grad_bytes > 0) {
          const double bandwidth = allreduce.seconds - allreduce.latency_seconds;
          step.seconds = allreduce.latency_seconds +
                         bandwidth * (grad_bytes + weight_bytes) / (2.0 * grad_bytes);
        }
        st.dp_collective = step;
        st.dp_comm_seconds = step.seconds;
        const double tail = step.seconds / std::max(1, c.gradient_buckets);
        st.dp_exposed_seconds = std::max(tail, step.seconds - overlappable * last_backward);
        dp_latency = step.latency_seconds;
        break;
      }
      case 2: {
        // Partitioned gradients are reduce-scattered after every micro-batch's
        // backward; the updated weights are all-gathered once per step.
        st.dp_collective = shard;
        const double tail = shard.seconds / std::max(1, c.gradient_buckets);
        st.dp_comm_seconds = k * shard.seconds + gather.seconds;
        st.dp_exposed_seconds =
            k * std::max(tail, shard.seconds - overlappable * last_backward) + gather.seconds;
        dp_latency = k * shard.latency_seconds + gather.latency_seconds;
        break;
      }
      default: {
        // ZeRO-3 / FSDP: weights all-gathered for forward and for backward
        // and gradients reduce-scattered, every micro-batch (1.5x an
        // all-reduce's volume when both are 16-bit), prefetched a layer
        // ahead of the compute.
        st.dp_collective = shard;
        const double per_microbatch = 2.0 * gather.seconds + shard.seconds;
        const double compute = layers_per_stage * (fwd + bwd + recompute);
        const double tail = per_microbatch / std::max(1, c.gradient_buckets);
        st.dp_comm_seconds = k * per_microbatch;
        st.dp_exposed_seconds = k * std::max(tail, per_microbatch - overlappable * compute);
        dp_latency = k * (2.0 * gather.latency_seconds + shard.latency_seconds);
        break;
      }
    }
  }

  // --- optimizer update: streams gradients, state and weights through HBM ---
  const double shard_params = stage_params / (l.zero_stage >= 1 ? d : 1);
  const double update_bytes_per_param =
      ctx.state.gradients + 2.0 * ctx.state.optimizer + ctx.state.weights;
  st.optimizer_seconds = shard_params * update_bytes_per_param / ctx.hbm_bytes_per_second;
  st.overhead_seconds = c.step_overhead_seconds;

  // What no amount of parallelism removes from this layout's step: every
  // kernel's launch, the exposed collectives' latency, the fixed per-step
  // cost. A lower bound of the prediction below.
  const double microbatch_slots = k + (p - 1.0) / v;
  const double tp_collectives_per_layer = l.recompute == Recompute::kFull ? 6.0 : (sp ? 5.0 : 4.0);
  const double tp_exposed_share = st.tp_overlap ? c.tp_overlap_exposed_fraction : 1.0;
  st.latency_floor_seconds =
      microbatch_slots * layers_per_stage * 3.0 * kernels_fwd * launch + k * 3.0 * launch +
      (t > 1 ? microbatch_slots * layers_per_stage * tp_collectives_per_layer *
                   st.tp_collective.latency_seconds * tp_exposed_share
             : 0.0) +
      std::min(dp_latency, st.dp_exposed_seconds) + st.overhead_seconds;

  st.calibration_ratio = ctx.step_time_ratio;
  const double predicted = st.compute_seconds + st.recompute_seconds + st.tp_exposed_seconds +
                           st.sharding_overhead_seconds + st.pp_p2p_seconds + st.pp_bubble_seconds +
                           st.dp_exposed_seconds + st.optimizer_seconds + st.overhead_seconds;
  st.step_seconds = predicted * ctx.step_time_ratio;

  // --- the whole run ---
  TotalTimeBreakdown& tot = out->total;
  const int gpus = l.nodes * l.gpus_per_node;
  tot.optimizer_steps = ctx.optimizer_steps;
  tot.training_seconds = static_cast<double>(ctx.optimizer_steps) * st.step_seconds;
  tot.startup_seconds = c.startup_seconds;
  // A checkpoint holds weights and optimizer state of the whole model, written
  // by all nodes in parallel.
  const double checkpoint_bytes = TotalParameters(m) * (ctx.state.weights + ctx.state.optimizer);
  tot.checkpoint_write_seconds =
      checkpoint_bytes / (l.nodes * c.checkpoint_write_bytes_per_second_per_node);
  tot.job_mtbf_seconds = c.gpu_mtbf_seconds / gpus;
  // Young/Daly: tau = sqrt(2 delta M), never more often than once a step.
  const double interval =
      ctx.job->checkpoint.interval_seconds
          ? *ctx.job->checkpoint.interval_seconds
          : std::sqrt(2.0 * tot.checkpoint_write_seconds * tot.job_mtbf_seconds);
  tot.checkpoint_interval_seconds = std::max(interval, st.step_seconds);
  // One write per interval begun: the periodic ones and the workers' final
  // one after the last step (where a periodic one would fall on the last
  // step, the final one is it).
  tot.checkpoint_overhead_seconds =
      std::ceil(tot.training_seconds / tot.checkpoint_interval_seconds) *
      tot.checkpoint_write_seconds;
  // Each failure loses the work since the last checkpoint, plus a restart.
  // With failures uniform over the run: half an interval on average, but no
  // more than the run has done; an interval longer than the run (a user's
  // 365d) loses half the run, not half a year.
  const double exposed = tot.training_seconds + tot.checkpoint_overhead_seconds;
  const double failures = exposed / tot.job_mtbf_seconds;
  tot.failure_rework_seconds =
      failures *
      (MeanWorkLostSeconds(exposed, tot.checkpoint_interval_seconds) + c.restart_seconds);
  tot.total_seconds = tot.startup_seconds + tot.training_seconds + tot.checkpoint_overhead_seconds +
                      tot.failure_rework_seconds;

  const double gbs = static_cast<double>(ctx.job->training.global_batch_size);
  out->model_flops_per_step = ctx.model_flops_per_sequence * gbs;
  out->hardware_flops_per_step = HardwareFlopsPerSequence(m, l.recompute, stack.attention) * gbs;
  out->mfu = out->model_flops_per_step /
             (st.step_seconds * gpus * ctx.gpu->PeakFlops(ctx.job->training.precision));
  out->gpu_hours = gpus * tot.total_seconds / 3600.0;
  out->cost = out->gpu_hours * ctx.price_per_gpu_hour;
}

}  // namespace internal

Evaluation Evaluate(const JobSpec& job, const Layout& layout, const NodePool& pool,
                    const GpuType& gpu, const GpuCalibration* calibration,
                    const ModelConstants& constants) {
  const internal::PoolContext ctx =
      internal::MakePoolContext(job, pool, gpu, calibration, constants);
  Evaluation out;
  out.layout = layout;
  internal::EvaluateInto(ctx, layout, &out);
  return out;
}

MemoryBreakdown PredictMemory(const JobSpec& job, const Layout& layout, const GpuType& gpu,
                              const ModelConstants& constants) {
  NodePool pool;
  pool.gpus_per_node = layout.gpus_per_node;
  pool.nodes = layout.nodes;
  pool.network_gbps_per_node = 1;
  const internal::PoolContext ctx = internal::MakePoolContext(job, pool, gpu, nullptr, constants);
  return internal::PredictMemory(ctx, layout);
}

}  // namespace pacer::planner
