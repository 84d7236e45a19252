// --scale: shrinks a plan's model so a CPU run of it takes seconds per step.
// Hidden size (through the head dimension; the head counts stay), FFN size
// and sequence length scale by `scale`, the layer count by sqrt(scale);
// everything is rounded so the plan's parallelism still divides it (heads
// and sequence by t, layers by p x v). The vocabulary is kept. The metrics
// export the scale, so a scaled run is never mistaken for the real one.
//
// Units: a dimensionless factor in (0, 1]. Thread-safety: a pure function.
#ifndef PACER_WORKER_CPU_MODEL_SCALE_H_
#define PACER_WORKER_CPU_MODEL_SCALE_H_

#include "core/worker_config.h"
#include "pacer/status.h"

namespace pacer::worker::cpu {

// `config` with its model shrunk by config.scale (unchanged at 1).
// InvalidArgument for a scale outside (0, 1].
StatusOr<WorkerConfig> ScaledConfig(const WorkerConfig& config);

}  // namespace pacer::worker::cpu

#endif  // PACER_WORKER_CPU_MODEL_SCALE_H_
