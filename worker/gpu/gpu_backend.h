// The GPU backend: the step executor (core/step_executor.h) over the GPU
// device (gpu_device.h: cuBLAS GEMMs, CUDA kernels, NCCL collectives), as
// the CPU backend is the executor over the CPU device. The orchestration of
// a step (pipeline order, buckets, ZeRO, recomputation) is the executor's,
// shared with the CPU backend; only the device differs. Loaded by
// pacer-worker through the plugin (gpu_plugin.h); pacer-gpu-smoke links it.
//
// One rank, one GPU (device = LOCAL_RANK); fewer visible GPUs than local
// ranks is refused at Initialize (InvalidArgument). The first step of a
// process includes cuBLAS and NCCL warm-up: callers discard it.
//
// Units: seconds, bytes, FLOPs (multiply-add = 2).
// Thread-safety: one rank's thread (StepBackend's contract).
#ifndef PACER_WORKER_GPU_GPU_BACKEND_H_
#define PACER_WORKER_GPU_GPU_BACKEND_H_

#include <memory>

#include "core/step_executor.h"
#include "gpu/gpu_device.h"

namespace pacer::worker {

// The GPU backend, as the runner sees it.
std::unique_ptr<StepBackend> MakeGpuBackend();

namespace gpu {

// The executor over a GPU device, without the executor's host copies (its
// test hooks stay empty; last_loss() works).
class GpuBackend : public StepExecutor {
 public:
  GpuBackend() : StepExecutor(MakeGpuDevice(), /*host_copies=*/false) {}
};

}  // namespace gpu
}  // namespace pacer::worker

#endif  // PACER_WORKER_GPU_GPU_BACKEND_H_
