// The GPU StepBackend (not yet on the shared step executor,
// core/step_executor.h; docs/worker.md says what remains): executes a rank's StepSchedule with cuBLAS GEMMs,
// CUDA kernels for the elementwise work and NCCL collectives.
//
// One rank, one GPU (device = LOCAL_RANK). Initialize allocates every buffer
// through a DeviceAllocator as device_layout.h plans it (weights, gradients
// and optimizer state sharded by ZeRO stage, one activation stash per layer
// and (micro-batch, chunk) in flight, logits on the last stage, workspace),
// initialises weights from a hash of (seed, stage, tensor rank, index), and
// connects the communicators (nccl_comms.h). RunStep walks the schedule's
// 1F1B order: per forward, receive the input (or embed), run the chunk's
// layers (GEMMs, kernels, tensor-parallel sequence-parallel collectives on
// the compute stream), send the output; per backward, the same in reverse
// with the planned recomputation first; data-parallel gradient collectives
// go in kGradientBuckets buckets on a second stream as soon as a bucket's
// gradients are final, so they overlap the last backward; then the
// optimizer update of this rank's shard and, for ZeRO 1 and 2, the weight
// all-gather.
//
// Timing uses CUDA events: step_seconds is the compute stream's wall time;
// collective_seconds sums every collective's own span; exposed communication
// is the span of collectives on the compute stream plus the time the compute
// stream stalls waiting for the collective stream. The first step includes
// cuBLAS and NCCL warm-up: callers discard it (and any other warm-up steps).
//
// Simplifications (each keeps the planner's FLOPs and bytes): the loss is a
// synthetic cross-entropy over this rank's vocabulary shard against hashed
// targets (no vocabulary-parallel reduction); token ids are hashed into the
// local embedding shard; no dropout; fp16 runs without loss scaling; an fp8
// plan is refused (InvalidArgument: no fp8 GEMM path yet). Fewer visible
// GPUs than local ranks is refused at Initialize. ZeRO 2 and 3 stage the whole stage's
// gradients (and, for 3, weights) in workspace buffers instead of bucket-
// sized ones, so their measured peak exceeds the plan by that staging,
// which PeakMemoryBytes' caller can read from the plan's workspace entries.
//
// Units and thread-safety: as StepBackend.
#ifndef PACER_WORKER_GPU_GPU_BACKEND_H_
#define PACER_WORKER_GPU_GPU_BACKEND_H_

#include <memory>

#include "core/step_backend.h"

namespace pacer::worker {

std::unique_ptr<StepBackend> MakeGpuBackend();

}  // namespace pacer::worker

#endif  // PACER_WORKER_GPU_GPU_BACKEND_H_
