// The cost model: for a job and a layout on a node pool, predicts memory per
// GPU, step time, total time and cost. Every formula and its source is in
// docs/planner.md; the constants below are its only tunable numbers, each
// with where its default comes from.
//
// Units are in the names: _bytes, _seconds, _flops, _gbps (GB/s unless the
// name says Gbit/s). Thread-safety: pure functions of their arguments.
#ifndef PACER_PLANNER_COST_MODEL_H_
#define PACER_PLANNER_COST_MODEL_H_

#include <cstdint>
#include <optional>

#include "pacer/planner/calibration.h"
#include "pacer/planner/collectives.h"
#include "pacer/planner/gpu_catalog.h"
#include "pacer/planner/inventory.h"
#include "pacer/planner/job_spec.h"
#include "pacer/planner/layout.h"

namespace pacer::planner {

// Efficiencies and fixed costs. Defaults: see docs/planner.md "Constants";
// those marked (fit) were set against published runs (Korthikanti et al.
// 2022 Table 5 on A100; llm-foundry's H100 table): chosen next to fits of
// earlier versions of this model and kept, not the output of today's fit
// (docs/planner.md section 7 gives both); the fit's leave-one-group-out
// error is in docs/benchmarks.md.
struct ModelConstants {
  // Fraction of dense peak the linear layers' 16-bit GEMMs reach in a
  // training step, for GPU types the catalog has no figure for (types an
  // inventory adds): Ampere's fit. The catalog's gemm_efficiency (A100 0.84,
  // Hopper 0.62, fit) and a calibration's gemmEfficiency replace it.
  double gemm_efficiency = 0.84;
  // fp8 GEMMs as a fraction of the fp8 dense peak when the catalog has no
  // figure (public cuBLAS results: ~1,300 of 1,979 TFLOP/s at 8192^3).
  double fp8_gemm_efficiency = 0.66;
  // A fused attention kernel (FlashAttention, cuDNN SDPA) as a fraction of
  // the 16-bit dense peak, counting the FLOPs it really does (causal: half
  // the s x s matrix; backward 2.5x forward because it recomputes the
  // scores) (fit, on H100).
  double flash_attention_efficiency = 0.18;
  // Achieved busbw of tensor-parallel collectives inside a node as a fraction
  // of unidirectional NVLink bandwidth (fit). Small, frequent collectives
  // with launch and synchronization cost are far from nccl-tests' large-
  // message busbw.
  double tp_link_efficiency = 0.30;
  // With tensor-parallel communication overlap (Megatron --tp-comm-overlap:
  // the collectives are split into chunks pipelined with the GEMMs), the share
  // of the collective time still exposed.
  double tp_overlap_exposed_fraction = 0.30;
  // Elementwise (norm, activation, dropout, residual, softmax) HBM traffic in
  // multiples of the activation bytes a layer stores (fit).
  double elementwise_traffic_factor = 0.5;
  // Large-message collectives vs link peak: NVLink (nccl-tests on DGX A100
  // reach ~230 of 300 GB/s unidirectional).
  double nvlink_collective_efficiency = 0.75;
  // Inter-node: Calculon's InfiniBand efficiency.
  double network_efficiency = 0.9;
  // NCCL's latency terms (its tuning model's order of magnitude): a
  // collective kernel's fixed cost, and one hop of the low-latency protocol
  // over NVLink and over the network.
  double collective_base_seconds = 7e-6;
  double nvlink_hop_seconds = 0.6e-6;
  double network_hop_seconds = 5e-6;
  // Fraction of HBM bandwidth streaming kernels reach (device-to-device copy
  // measured ~3.0 of 3.35 TB/s on an H100).
  double hbm_efficiency = 0.85;
  // The latency floor: no kernel takes less than a launch, a transformer
  // layer's forward is about this many kernels (norms, GEMMs, rotary,
  // attention, activation, residuals; backward twice as many), and every
  // optimizer step has a fixed cost (optimizer and gradient-norm kernels,
  // loss reduction, data loading hand-off).
  double kernel_launch_seconds = 4e-6;
  // Sharded data parallelism (ZeRO-2/3 as PyTorch FSDP runs it) pays a fixed
  // cost per layer and micro-batch beyond its collectives' time: the per-layer
  // gather and reduce-scatter issue, their stream synchronisation with
  // compute, and the allocations of the gathered weights (fit, on H100).
  double sharded_layer_overhead_seconds = 5.25e-3;
  int kernels_per_layer_forward = 14;
  double step_overhead_seconds = 1e-3;
  // Fixed memory: CUDA context and library workspaces (seed article).
  double cuda_context_bytes = 1.3e9;
  // Allocator fragmentation reserve as a share of GPU memory.
  double fragmentation_fraction = 0.05;
  // Data-parallel gradient buckets: the last one cannot overlap.
  int gradient_buckets = 8;
  // Time from pods scheduled to the first step (image pull excluded).
  double startup_seconds = 300;
  // Per-GPU mean time between failures: Llama 3, 419 interruptions in 54 days
  // on 16,384 GPUs -> ~5.3e4 GPU-hours.
  double gpu_mtbf_seconds = 16384.0 * 54 * 24 * 3600 / 419;
  // Checkpoint write bandwidth per node to shared storage, bytes/s.
  double checkpoint_write_bytes_per_second_per_node = 2e9;
  // Time to restart after a failure (reschedule, load checkpoint).
  double restart_seconds = 600;
};

// Memory per GPU on the most loaded GPU (first pipeline stage, or the last
// when it holds the logits), in bytes.
struct MemoryBreakdown {
  double weights_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;
  double logits_bytes = 0;
  // ZeRO-3 working buffers: the current and the prefetched layer's gathered
  // weights and the layer's unsharded gradients (FSDP's unit of gathering).
  double buffers_bytes = 0;
  double reserve_bytes = 0;   // CUDA context + fragmentation reserve + the job's margin
  double capacity_bytes = 0;  // the GPU's memory

  double total_bytes() const {
    return weights_bytes + gradients_bytes + optimizer_bytes + activations_bytes + logits_bytes +
           buffers_bytes + reserve_bytes;
  }
  bool fits() const { return total_bytes() <= capacity_bytes; }
};

// One optimizer step on the slowest pipeline stage, in seconds, and how the
// stack the job declares shaped it.
struct StepTimeBreakdown {
  double compute_seconds = 0;            // forward + backward: GEMMs, attention, elementwise
  double attention_seconds = 0;          // ... of which the attention core (fused kernel or
                                         //     score GEMMs and softmax)
  double recompute_seconds = 0;          // the forward work recomputation repeats
  double tp_comm_seconds = 0;            // tensor-parallel collectives, total
  double tp_exposed_seconds = 0;         // ... the part not hidden behind GEMMs
  double pp_bubble_seconds = 0;          // pipeline fill and drain
  double pp_p2p_seconds = 0;             // activations between stages
  double dp_comm_seconds = 0;            // data-parallel / ZeRO collectives, total
  double dp_exposed_seconds = 0;         // ... the part not hidden behind compute
  double sharding_overhead_seconds = 0;  // ZeRO-2/3 per-layer fixed costs
  double optimizer_seconds = 0;          // the parameter update, HBM bound
  double overhead_seconds = 0;           // fixed per-step cost
  // The step this layout cannot beat however small the work: kernel launches,
  // collective latencies and the fixed per-step cost (included above).
  double latency_floor_seconds = 0;
  double calibration_ratio = 1;  // measured / predicted, applied to the sum
  double step_seconds = 0;       // the prediction

  // What the model assumed (for explain).
  AttentionKernel attention = AttentionKernel::kFused;
  bool tp_overlap = false;
  bool dp_overlap = false;
  CollectiveTime tp_collective;  // one tensor-parallel all-reduce
  CollectiveTime dp_collective;  // the data-parallel gradient collective, once
};

// The whole run, in seconds.
struct TotalTimeBreakdown {
  int64_t optimizer_steps = 0;
  double training_seconds = 0;  // optimizer_steps x step_seconds
  double startup_seconds = 0;
  double checkpoint_interval_seconds = 0;  // Young/Daly or as pinned
  double checkpoint_write_seconds = 0;     // one checkpoint
  double checkpoint_overhead_seconds = 0;  // all checkpoint writes
  double job_mtbf_seconds = 0;
  double failure_rework_seconds = 0;  // expected lost work + restarts
  double total_seconds = 0;
};

struct Evaluation {
  Layout layout;
  MemoryBreakdown memory;
  StepTimeBreakdown step;
  TotalTimeBreakdown total;
  double model_flops_per_step = 0;  // all GPUs together
  double hardware_flops_per_step = 0;
  double mfu = 0;  // model FLOP/s per GPU / catalog peak
  double gpu_hours = 0;
  double cost = 0;  // gpu_hours x price; 0 when price unknown
};

// Predicts everything for `layout` on `pool`. Does not check feasibility
// (memory fit, deadline, free GPUs): the search does. `calibration` may be
// null. The GPU type must support job.training.precision.
Evaluation Evaluate(const JobSpec& job, const Layout& layout, const NodePool& pool,
                    const GpuType& gpu, const GpuCalibration* calibration,
                    const ModelConstants& constants = {});

// Memory only (cheaper; the search checks it before timing a layout).
MemoryBreakdown PredictMemory(const JobSpec& job, const Layout& layout, const GpuType& gpu,
                              const ModelConstants& constants = {});

// Bytes per parameter for weights, gradients and optimizer state before ZeRO
// sharding, by precision, optimizer and the gradients' precision under a
// 16-bit plan (StackSpec::fp32_gradients): mixed precision Adam keeps 2 + 4
// + 12 with fp32 gradients (Megatron's 18), 2 + 2 + 12 without (the ZeRO
// paper's 16); fp32 Adam 4 + 4 + 8.
struct StateBytesPerParameter {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
};
StateBytesPerParameter StateBytes(Precision precision, Optimizer optimizer, bool fp32_gradients);

// Weights + gradients + optimizer bytes per GPU for `parameters` parameters
// held by a model-parallel rank under ZeRO `stage` with data parallelism `d`
// (ZeRO paper: stage 1 shards optimizer state, 2 also gradients, 3 also weights).
struct ShardedStateBytes {
  double weights_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_bytes = 0;
  double total_bytes() const { return weights_bytes + gradients_bytes + optimizer_bytes; }
};
ShardedStateBytes ShardedState(double parameters, StateBytesPerParameter per_parameter,
                               int zero_stage, int data_parallel);

// Activation bytes one transformer layer stores for one micro-batch
// (Korthikanti 2022, generalized to GQA and SwiGLU; 2-byte activations).
// A fused attention kernel never stores the 5 a s^2 b score bytes (softmax
// output, dropout mask and output), whatever the recomputation.
double LayerActivationBytes(const ModelSpec& m, int micro_batch_size, int tensor_parallel,
                            bool sequence_parallel, Recompute recompute, AttentionKernel attention);

// Calculon's GEMM efficiency prior as a multiplier (1 for GEMMs of >= 128
// GFLOP, falling to ~0.1 for tiny ones), interpolated on log(FLOPs).
double GemmSizeFactor(double flops_per_gemm);

}  // namespace pacer::planner

#endif  // PACER_PLANNER_COST_MODEL_H_
