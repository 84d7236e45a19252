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
#include "pacer/planner/gpu_catalog.h"
#include "pacer/planner/inventory.h"
#include "pacer/planner/job_spec.h"
#include "pacer/planner/layout.h"

namespace pacer::planner {

// Efficiencies and fixed costs. Defaults: see docs/planner.md "Constants";
// the three marked (fit) were fitted on Korthikanti et al. 2022, Table 5 and
// are reported with leave-one-model-out error in docs/benchmarks.md.
struct ModelConstants {
  // Fraction of dense peak reached by large GEMMs (fit; an 8192^3 bf16 GEMM
  // measured 0.807 of peak on an H100, 0.797 on an H200). Calibration's
  // gemmEfficiency replaces it per GPU type.
  double gemm_efficiency = 0.84;
  // Achieved busbw of tensor-parallel collectives inside a node as a fraction
  // of unidirectional NVLink bandwidth (fit). Small, frequent, un-overlapped
  // collectives with launch and synchronization cost are far from nccl-tests'
  // large-message busbw.
  double tp_link_efficiency = 0.30;
  // Elementwise (norm, activation, dropout, residual, softmax) HBM traffic in
  // multiples of the activation bytes a layer stores (fit).
  double elementwise_traffic_factor = 0.5;
  // Large-message collectives (data parallel, pipeline p2p) vs link peak:
  // NVLink (nccl-tests on DGX A100 reach ~230 of 300 GB/s unidirectional).
  double nvlink_collective_efficiency = 0.75;
  // Inter-node: Calculon's InfiniBand efficiency.
  double network_efficiency = 0.9;
  // Fraction of HBM bandwidth streaming kernels reach (device-to-device copy
  // measured ~3.0 of 3.35 TB/s on an H100).
  double hbm_efficiency = 0.85;
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
  double reserve_bytes = 0;  // CUDA context + fragmentation reserve
  double capacity_bytes = 0;  // the GPU's memory

  double total_bytes() const {
    return weights_bytes + gradients_bytes + optimizer_bytes + activations_bytes + logits_bytes +
           reserve_bytes;
  }
  bool fits() const { return total_bytes() <= capacity_bytes; }
};

// One optimizer step on the slowest pipeline stage, in seconds.
struct StepTimeBreakdown {
  double compute_seconds = 0;      // forward + backward GEMMs (and elementwise)
  double recompute_seconds = 0;    // the forward work recomputation repeats
  double tp_comm_seconds = 0;      // tensor-parallel collectives (not overlapped)
  double pp_bubble_seconds = 0;    // pipeline fill and drain
  double pp_p2p_seconds = 0;       // activations between stages
  double dp_comm_seconds = 0;      // gradient collective, total
  double dp_exposed_seconds = 0;   // ... the part not hidden behind backward
  double optimizer_seconds = 0;    // the parameter update, HBM bound
  double calibration_ratio = 1;    // measured / predicted, applied to the sum
  double step_seconds = 0;         // the prediction
};

// The whole run, in seconds.
struct TotalTimeBreakdown {
  int64_t optimizer_steps = 0;
  double training_seconds = 0;          // optimizer_steps x step_seconds
  double startup_seconds = 0;
  double checkpoint_interval_seconds = 0;  // Young/Daly or as pinned
  double checkpoint_write_seconds = 0;     // one checkpoint
  double checkpoint_overhead_seconds = 0;  // all checkpoint writes
  double job_mtbf_seconds = 0;
  double failure_rework_seconds = 0;       // expected lost work + restarts
  double total_seconds = 0;
};

struct Evaluation {
  Layout layout;
  MemoryBreakdown memory;
  StepTimeBreakdown step;
  TotalTimeBreakdown total;
  double model_flops_per_step = 0;     // all GPUs together
  double hardware_flops_per_step = 0;
  double mfu = 0;                      // model FLOP/s per GPU / catalog peak
  double gpu_hours = 0;
  double cost = 0;                     // gpu_hours x price; 0 when price unknown
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
// sharding, by precision and optimizer (ZeRO paper: 2 + 2 + 12 for mixed
// precision Adam; 4 + 4 + 8 for fp32 Adam).
struct StateBytesPerParameter {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
};
StateBytesPerParameter StateBytes(Precision precision, Optimizer optimizer);

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
double LayerActivationBytes(const ModelSpec& m, int micro_batch_size, int tensor_parallel,
                            bool sequence_parallel, Recompute recompute);

// Ring all-reduce of `bytes` over `ranks` at bus bandwidth `busbw_bytes_per_second`
// (nccl-tests: t = 2 (n-1)/n S / B). Reduce-scatter / all-gather are half.
double RingAllReduceSeconds(double bytes, int ranks, double busbw_bytes_per_second);

// Calculon's GEMM efficiency prior as a multiplier (1 for GEMMs of >= 128
// GFLOP, falling to ~0.1 for tiny ones), interpolated on log(FLOPs).
double GemmSizeFactor(double flops_per_gemm);

}  // namespace pacer::planner

#endif  // PACER_PLANNER_COST_MODEL_H_
