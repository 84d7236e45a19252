// Internal to the planner: the cost model's per-pool precomputation, so the
// search can evaluate many layouts of one job on one pool without redoing
// the work that depends only on (job, pool, GPU, calibration).
// Units as in cost_model.h. Thread-safety: PoolContext is immutable after
// MakePoolContext; sharing one across threads is safe.
#ifndef PACER_PLANNER_SRC_COST_MODEL_INTERNAL_H_
#define PACER_PLANNER_SRC_COST_MODEL_INTERNAL_H_

#include <cstdint>

#include "pacer/planner/cost_model.h"

namespace pacer::planner::internal {

struct PoolContext {
  const JobSpec* job = nullptr;
  const NodePool* pool = nullptr;
  const GpuType* gpu = nullptr;
  ModelConstants constants;

  double peak_flops = 0;            // dense peak for the job's precision (linear GEMMs)
  double gemm_efficiency = 0;       // of that peak, for large GEMMs
  double peak16_flops = 0;          // 16-bit peak: attention and logits (fp8 runs only
                                    // the linear layers in fp8)
  double gemm16_efficiency = 0;
  double hbm_bytes_per_second = 0;  // achieved by streaming kernels
  double nvlink_busbw = 0;          // large-message collectives inside a node, bytes/s
  double tp_busbw = 0;              // tensor-parallel collectives inside a node, bytes/s
  double network_busbw_per_node = 0;  // all of a node's NICs, achieved, bytes/s
  bool calibrated_network = false;  // network_busbw_per_node came from a calibration
  double step_time_ratio = 1;       // measured / predicted (calibration)
  double activation_bytes = 2;      // bytes per activation element
  StateBytesPerParameter state;
  double layer_parameters = 0;
  double model_flops_per_sequence = 0;
  int64_t optimizer_steps = 0;
  double price_per_gpu_hour = 0;
};

PoolContext MakePoolContext(const JobSpec& job, const NodePool& pool, const GpuType& gpu,
                            const GpuCalibration* calibration, const ModelConstants& constants);

MemoryBreakdown PredictMemory(const PoolContext& ctx, const Layout& layout);

// Fills every field of `out` except out->layout (the caller copies the
// layout only for the evaluations it keeps).
void EvaluateInto(const PoolContext& ctx, const Layout& layout, Evaluation* out);

}  // namespace pacer::planner::internal

#endif  // PACER_PLANNER_SRC_COST_MODEL_INTERNAL_H_
