// The cost model. docs/planner.md gives every formula with its source; the
// comments here say why a term has the shape it has.
#include "pacer/planner/cost_model.h"

#include <algorithm>
#include <cmath>

#include "cost_model_internal.h"
#include "pacer/planner/layer_shapes.h"
#include "pacer/planner/model_math.h"

namespace pacer::planner {
namespace {

// PCIe Gen4 x16, one direction: the GPU-to-GPU path on nodes without NVLink.
constexpr double kPcieBytesPerSecond = 32e9;

bool IsMixedPrecision(Precision p) {
  return p == Precision::kBf16 || p == Precision::kFp16 || p == Precision::kFp8;
}

double GemmSeconds(const internal::PoolContext& ctx, const GemmShape& g) {
  const double flops = g.flops();
  return flops / (ctx.peak_flops * ctx.gemm_efficiency * GemmSizeFactor(flops));
}

// Forward GEMM time of one layer for one micro-batch on one GPU under t-way
// tensor parallelism (layer_shapes.h). Backward costs twice this.
double LayerForwardGemmSeconds(const internal::PoolContext& ctx, int b, int t) {
  double seconds = 0;
  for (const GemmShape& g : LayerForwardGemms(ctx.job->model, b, t)) seconds += GemmSeconds(ctx, g);
  return seconds;
}

double AttentionCoreForwardSeconds(const internal::PoolContext& ctx, int b, int t) {
  double seconds = 0;
  for (const GemmShape& g : AttentionCoreGemms(ctx.job->model, b, t)) {
    seconds += GemmSeconds(ctx, g);
  }
  return seconds;
}

// Korthikanti's score term (softmax output, dropout mask and output:
// 5 a s^2 b bytes per layer), the part selective recomputation drops.
double AttentionScoreBytes(const ModelSpec& m, int b, int t) {
  return 5.0 * m.attention_heads * static_cast<double>(m.sequence_length) * m.sequence_length * b /
         t;
}

// Parameters held by one GPU of the most loaded pipeline stage: its layers
// and one V x h matrix (input embedding on the first stage, output projection
// on the last; both on a single stage unless tied), split t ways.
double StageParameters(const internal::PoolContext& ctx, const Layout& l) {
  const ModelSpec& m = ctx.job->model;
  const double layers_per_stage = static_cast<double>(m.layers) / l.pipeline_parallel;
  const double tables =
      (l.pipeline_parallel == 1 && !m.tied_embeddings) ? 2.0 : 1.0;
  return (layers_per_stage * ctx.layer_parameters + tables * ctx.embedding_table_parameters) /
         l.tensor_parallel;
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

double RingAllReduceSeconds(double bytes, int ranks, double busbw_bytes_per_second) {
  if (ranks <= 1 || bytes <= 0) return 0;
  return 2.0 * (ranks - 1) / ranks * bytes / busbw_bytes_per_second;
}

StateBytesPerParameter StateBytes(Precision precision, Optimizer optimizer) {
  StateBytesPerParameter s;
  if (IsMixedPrecision(precision)) {
    // 16-bit weights and gradients; the optimizer keeps an fp32 master copy
    // (4) plus its fp32 moments (ZeRO paper's K = 12 for Adam).
    s.weights = 2;
    s.gradients = 2;
    switch (optimizer) {
      case Optimizer::kAdamW:
      case Optimizer::kAdam: s.optimizer = 12; break;
      case Optimizer::kSgdMomentum: s.optimizer = 8; break;
      case Optimizer::kSgd:
      case Optimizer::kAdafactor: s.optimizer = 4; break;  // factored moments ~ 0
    }
  } else {
    s.weights = 4;
    s.gradients = 4;
    switch (optimizer) {
      case Optimizer::kAdamW:
      case Optimizer::kAdam: s.optimizer = 8; break;
      case Optimizer::kSgdMomentum: s.optimizer = 4; break;
      case Optimizer::kSgd:
      case Optimizer::kAdafactor: s.optimizer = 0; break;
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
                            bool sequence_parallel, Recompute recompute) {
  const double sbh = static_cast<double>(m.sequence_length) * micro_batch_size * m.hidden_size;
  const double t = tensor_parallel;
  const bool sp = sequence_parallel && tensor_parallel > 1;
  if (recompute == Recompute::kFull) return 2.0 * sbh / (sp ? t : 1.0);  // the layer's input only
  // Korthikanti's 34 sbh split into what tensor parallelism replicates (norm
  // inputs, attention and MLP inputs, two dropout masks: 10) and what it
  // shards (Q, K, V, attention output, MLP hidden activations: 24 for MHA
  // with a 4h GELU MLP), generalised to GQA and SwiGLU.
  const double h = m.hidden_size;
  const double kv_ratio = static_cast<double>(m.kv_heads) / m.attention_heads;
  const double replicated = 10.0;
  const double attention_sharded = 4.0 + 4.0 * kv_ratio;
  const double mlp_sharded = (m.ffn_kind == FfnKind::kSwiglu ? 6.0 : 4.0) * m.ffn_hidden_size / h;
  const double sharded = attention_sharded + mlp_sharded;
  double bytes = sbh * (sp ? (replicated + sharded) / t : replicated + sharded / t);
  if (recompute == Recompute::kNone) bytes += AttentionScoreBytes(m, micro_batch_size, tensor_parallel);
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
  ctx.peak_flops = gpu.PeakFlops(precision);
  ctx.gemm_efficiency = (cal && cal->gemm_efficiency) ? *cal->gemm_efficiency : c.gemm_efficiency;
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
  const double node_bytes_per_second = pool.network_gbps_per_node * 1e9 / 8;
  ctx.network_busbw_per_gpu = (cal && cal->inter_node_busbw_gbps)
                                  ? *cal->inter_node_busbw_gbps * 1e9
                                  : node_bytes_per_second / pool.gpus_per_node * c.network_efficiency;
  ctx.step_time_ratio = (cal && cal->step_time_ratio) ? *cal->step_time_ratio : 1.0;
  ctx.activation_bytes = IsMixedPrecision(precision) ? 2.0 : 4.0;
  ctx.state = StateBytes(precision, job.training.optimizer);
  ctx.layer_parameters = LayerParameters(job.model);
  ctx.embedding_table_parameters =
      static_cast<double>(job.model.vocab_size) * job.model.hidden_size;
  ctx.model_flops_per_sequence = ModelFlopsPerSequence(job.model);
  // Optimizer steps per epoch = ceil(samples / GBS); accumulation does not
  // change it (it multiplies micro-steps, not optimizer steps).
  const double samples_per_epoch = job.data.samples
                                       ? *job.data.samples
                                       : std::ceil(job.data.tokens.value_or(0) /
                                                   job.model.sequence_length);
  const double steps_per_epoch =
      std::ceil(samples_per_epoch / static_cast<double>(job.training.global_batch_size));
  ctx.optimizer_steps = static_cast<int64_t>(steps_per_epoch) * job.data.epochs;
  ctx.price_per_gpu_hour = pool.price_per_gpu_hour > 0 ? pool.price_per_gpu_hour
                                                       : gpu.price_per_gpu_hour;
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
  const double per_layer = element_scale * LayerActivationBytes(m, l.micro_batch_size,
                                                                l.tensor_parallel,
                                                                l.sequence_parallel, l.recompute);
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
    first_stage += element_scale * LayerActivationBytes(m, l.micro_batch_size, l.tensor_parallel,
                                                        l.sequence_parallel, Recompute::kNone);
  }
  // The last stage holds one micro-batch of logits: 16-bit logits plus the
  // fp32 copy the cross-entropy works on, vocabulary split t ways.
  const double logits = static_cast<double>(m.sequence_length) * l.micro_batch_size *
                        m.vocab_size * (ctx.activation_bytes + 4.0) / l.tensor_parallel;
  const double last_stage = (p == 1 ? first_stage : per_layer * layers_per_stage) + logits;
  if (p == 1 || first_stage >= last_stage) {
    mem.activations_bytes = first_stage;
    mem.logits_bytes = p == 1 ? logits : 0;
  } else {
    mem.activations_bytes = per_layer * layers_per_stage;
    mem.logits_bytes = logits;
  }
  mem.capacity_bytes = ctx.gpu->memory_bytes();
  mem.reserve_bytes = c.cuda_context_bytes + c.fragmentation_fraction * mem.capacity_bytes;
  return mem;
}

void EvaluateInto(const PoolContext& ctx, const Layout& l, Evaluation* out) {
  const ModelSpec& m = ctx.job->model;
  const ModelConstants& c = ctx.constants;
  const int t = l.tensor_parallel, p = l.pipeline_parallel, d = l.data_parallel;
  const int b = l.micro_batch_size;
  const double k = static_cast<double>(l.gradient_accumulation_steps);
  const double v = l.virtual_stages;
  const bool sp = l.sequence_parallel && t > 1;
  const double layers_per_stage = static_cast<double>(m.layers) / p;

  out->memory = PredictMemory(ctx, l);

  // --- one micro-batch through one layer on one GPU ---
  const double gemm_fwd = LayerForwardGemmSeconds(ctx, b, t);
  // Memory-bound elementwise work moves a multiple of what the layer stores.
  const double element_scale = ctx.activation_bytes / 2.0;
  const double act_bytes_no_recompute =
      element_scale * LayerActivationBytes(m, b, t, sp, Recompute::kNone);
  const double elementwise_fwd =
      c.elementwise_traffic_factor * act_bytes_no_recompute / ctx.hbm_bytes_per_second;
  const double fwd = gemm_fwd + elementwise_fwd;
  const double bwd = 2.0 * fwd;
  double recompute = 0;
  if (l.recompute == Recompute::kFull) {
    recompute = fwd;
  } else if (l.recompute == Recompute::kSelective) {
    recompute = AttentionCoreForwardSeconds(ctx, b, t) +
                c.elementwise_traffic_factor * element_scale * AttentionScoreBytes(m, b, t) /
                    ctx.hbm_bytes_per_second;
  }
  // Tensor parallelism: 2 all-reduces of b s h activations forward and 2
  // backward (Megatron-LM); full recomputation repeats the forward two; with
  // sequence parallelism each becomes reduce-scatter + all-gather (same
  // volume) and backward re-gathers the inputs of the weight gradients (one
  // more all-reduce's worth).
  double tp_comm = 0;
  if (t > 1) {
    const double message = b * static_cast<double>(m.sequence_length) * m.hidden_size *
                           ctx.activation_bytes;
    const double collectives = l.recompute == Recompute::kFull ? 6.0 : (sp ? 5.0 : 4.0);
    tp_comm = collectives * RingAllReduceSeconds(message, t, ctx.tp_busbw);
  }

  // --- one micro-batch through one pipeline stage ---
  const double logits_fwd = GemmSeconds(ctx, LogitsGemm(m, b, t));
  const double logits = 3.0 * logits_fwd;  // last stage only; never recomputed
  double p2p = 0;
  if (p > 1) {
    // Forward activations and backward gradients cross each stage boundary
    // once per model chunk; with sequence parallelism each TP rank sends its
    // 1/t share (Megatron's scatter-gather).
    const double message = b * static_cast<double>(m.sequence_length) * m.hidden_size *
                           ctx.activation_bytes / (sp ? t : 1);
    const bool crosses_nodes = t * p > l.gpus_per_node;
    const double bw = crosses_nodes ? ctx.network_busbw_per_gpu : ctx.nvlink_busbw;
    p2p = 2.0 * v * message / bw;
  }
  const double per_layer = fwd + bwd + recompute + tp_comm;
  const double stage_microbatch = layers_per_stage * per_layer + p2p;

  StepTimeBreakdown& st = out->step;
  st.compute_seconds = k * (layers_per_stage * (fwd + bwd) + logits);
  st.recompute_seconds = k * layers_per_stage * recompute;
  st.tp_comm_seconds = k * layers_per_stage * tp_comm;
  st.pp_p2p_seconds = k * p2p;
  // Fill and drain: (p-1)/v micro-batch slots (GPipe/1F1B; interleaved, Narayanan 2021).
  st.pp_bubble_seconds = (p - 1.0) / v * stage_microbatch;

  // --- data-parallel gradient collective ---
  const double stage_params = StageParameters(ctx, l);
  st.dp_comm_seconds = 0;
  st.dp_exposed_seconds = 0;
  if (d > 1) {
    const double bw = l.nodes > 1 ? ctx.network_busbw_per_gpu : ctx.nvlink_busbw;
    const double grad_bytes = stage_params * ctx.state.gradients;
    const double allreduce = RingAllReduceSeconds(grad_bytes, d, bw);
    const double last_backward = layers_per_stage * bwd;
    const double tail = allreduce / std::max(1, c.gradient_buckets);
    switch (l.zero_stage) {
      case 0:
      case 1:
        // All-reduce (ZeRO-1: reduce-scatter + all-gather, same volume) once
        // per step, in buckets overlapped with the last backward.
        st.dp_comm_seconds = allreduce;
        st.dp_exposed_seconds = std::max(tail, allreduce - last_backward);
        break;
      case 2: {
        // Partitioned gradients are reduce-scattered after every micro-batch's
        // backward; the updated weights are all-gathered once per step.
        const double per_microbatch = allreduce / 2;
        st.dp_comm_seconds = k * per_microbatch + allreduce / 2;
        st.dp_exposed_seconds =
            k * std::max(tail / 2, per_microbatch - last_backward) + allreduce / 2;
        break;
      }
      default: {
        // ZeRO-3: weights all-gathered for forward and backward and gradients
        // reduce-scattered, every micro-batch: 1.5x an all-reduce, prefetched
        // behind that micro-batch's compute.
        const double per_microbatch = 1.5 * allreduce;
        const double compute = layers_per_stage * (fwd + bwd + recompute);
        st.dp_comm_seconds = k * per_microbatch;
        st.dp_exposed_seconds = k * std::max(tail, per_microbatch - compute);
        break;
      }
    }
  }

  // --- optimizer update: streams gradients, state and weights through HBM ---
  const double shard_params = stage_params / (l.zero_stage >= 1 ? d : 1);
  const double update_bytes_per_param =
      ctx.state.gradients + 2.0 * ctx.state.optimizer + ctx.state.weights;
  st.optimizer_seconds = shard_params * update_bytes_per_param / ctx.hbm_bytes_per_second;

  st.calibration_ratio = ctx.step_time_ratio;
  const double predicted = st.compute_seconds + st.recompute_seconds + st.tp_comm_seconds +
                           st.pp_p2p_seconds + st.pp_bubble_seconds + st.dp_exposed_seconds +
                           st.optimizer_seconds;
  st.step_seconds = predicted * ctx.step_time_ratio;

  // --- the whole run ---
  TotalTimeBreakdown& tot = out->total;
  const int gpus = l.nodes * l.gpus_per_node;
  tot.optimizer_steps = ctx.optimizer_steps;
  tot.training_seconds = static_cast<double>(ctx.optimizer_steps) * st.step_seconds;
  tot.startup_seconds = c.startup_seconds;
  // A checkpoint holds weights and optimizer state of the whole model, written
  // by all nodes in parallel.
  const double checkpoint_bytes =
      TotalParameters(m) * (ctx.state.weights + ctx.state.optimizer);
  tot.checkpoint_write_seconds =
      checkpoint_bytes / (l.nodes * c.checkpoint_write_bytes_per_second_per_node);
  tot.job_mtbf_seconds = c.gpu_mtbf_seconds / gpus;
  // Young/Daly: tau = sqrt(2 delta M), never more often than once a step.
  const double interval =
      ctx.job->checkpoint.interval_seconds
          ? *ctx.job->checkpoint.interval_seconds
          : std::sqrt(2.0 * tot.checkpoint_write_seconds * tot.job_mtbf_seconds);
  tot.checkpoint_interval_seconds = std::max(interval, st.step_seconds);
  tot.checkpoint_overhead_seconds =
      std::floor(tot.training_seconds / tot.checkpoint_interval_seconds) *
      tot.checkpoint_write_seconds;
  // Each failure loses half an interval of work on average, plus a restart.
  const double exposed = tot.training_seconds + tot.checkpoint_overhead_seconds;
  const double failures = exposed / tot.job_mtbf_seconds;
  tot.failure_rework_seconds =
      failures * (tot.checkpoint_interval_seconds / 2.0 + c.restart_seconds);
  tot.total_seconds = tot.startup_seconds + tot.training_seconds +
                      tot.checkpoint_overhead_seconds + tot.failure_rework_seconds;

  const double gbs = static_cast<double>(ctx.job->training.global_batch_size);
  out->model_flops_per_step = ctx.model_flops_per_sequence * gbs;
  out->hardware_flops_per_step = HardwareFlopsPerSequence(m, l.recompute) * gbs;
  out->mfu = out->model_flops_per_step / (st.step_seconds * gpus * ctx.gpu->PeakFlops(
                                                                      ctx.job->training.precision));
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
  const internal::PoolContext ctx =
      internal::MakePoolContext(job, pool, gpu, nullptr, constants);
  return internal::PredictMemory(ctx, layout);
}

}  // namespace pacer::planner
