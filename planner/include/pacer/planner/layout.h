// A Layout is one point of the search space: where a job runs and how it is
// split. Given a layout, the cost model (cost_model.h) predicts memory, step
// time and total time.
//
// Invariants of a valid layout (checked by the search, not here):
//   nodes x gpus_per_node = tensor_parallel x pipeline_parallel x data_parallel
//   micro_batch_size x gradient_accumulation_steps x data_parallel = global batch
// Thread-safety: a plain value type.
#ifndef PACER_PLANNER_LAYOUT_H_
#define PACER_PLANNER_LAYOUT_H_

#include <cstdint>
#include <string>

#include "pacer/planner/job_spec.h"

namespace pacer::planner {

// Micro-batch passes of one rank in one step (gradient accumulation steps x
// virtual stages) a layout may ask for: the worker's step schedule lists two
// actions for each, and refuses more (worker_config.h). A million keeps the
// list at 24 MiB, far above a real plan's; the search never plans more.
inline constexpr int64_t kMaxMicroBatchPassesPerStep = int64_t{1} << 20;

// The most GPUs one layout may use: past any cluster, and the largest
// spec.resources.minGPUs / maxGPUs a TrainJob and `pacer sweep --gpus` take.
inline constexpr int kMaxLayoutGpus = 1'000'000;

struct Layout {
  std::string pool;      // node pool name
  std::string gpu_type;  // catalog name
  int nodes = 1;
  int gpus_per_node = 1;
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  int data_parallel = 1;
  int virtual_stages = 1;  // interleaved pipeline chunks per GPU (v)
  int zero_stage = 0;
  int micro_batch_size = 1;
  int64_t gradient_accumulation_steps = 1;
  Recompute recompute = Recompute::kNone;
  // Megatron sequence parallelism; the search enables it whenever t > 1.
  bool sequence_parallel = false;

  int gpus() const { return nodes * gpus_per_node; }
  int64_t global_batch() const {
    return static_cast<int64_t>(micro_batch_size) * gradient_accumulation_steps * data_parallel;
  }
  // "H100-SXM 8x8 t2 p1 d32 z1 b4 k8 selective" for logs and tables.
  std::string ToString() const;
};

}  // namespace pacer::planner

#endif  // PACER_PLANNER_LAYOUT_H_
