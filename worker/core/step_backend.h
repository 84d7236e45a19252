// StepBackend: executes a StepSchedule on real hardware. Two
// implementations: the CPU backend (OpenBLAS sgemm, Gloo collectives over
// TCP; worker/cpu/) and the GPU backend (cuBLAS, CUDA kernels, NCCL;
// worker/gpu/). The runner (one per rank) drives it: Initialize once, then
// RunStep per optimizer step, SaveBuffers / LoadBuffers around checkpoints.
//
// Errors map onto exit codes (exit_codes.h) by Status code:
//   ResourceExhausted -> kExitOutOfMemory (an allocation failed),
//   Unavailable / DeadlineExceeded / Aborted -> kExitCollectiveFailure (a
//   peer died or a collective timed out; the backend has already aborted its
//   communicators so no rank hangs), InvalidArgument -> kExitInvalidConfig,
//   HardwareFault -> kExitDeviceFault (the GPU failed: ECC, NVLink),
//   anything else -> kExitInternalError.
//
// Units: seconds, bytes, FLOPs (multiply-add = 2).
// Thread-safety: a backend belongs to one rank's thread; not thread-safe.
#ifndef PACER_WORKER_CORE_STEP_BACKEND_H_
#define PACER_WORKER_CORE_STEP_BACKEND_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/step_schedule.h"
#include "core/tcp_store.h"
#include "core/worker_config.h"
#include "pacer/status.h"

namespace pacer::worker {

// What one optimizer step took on this rank.
struct StepTiming {
  double step_seconds = 0;                   // wall time of the whole step
  double compute_seconds = 0;                // GEMMs and elementwise kernels
  double collective_seconds = 0;             // inside collectives, all groups
  double exposed_communication_seconds = 0;  // collective time not hidden behind compute
  double collective_bus_bytes = 0;           // nccl-tests bus bytes this rank moved
  double gemm_flops = 0;                     // FLOPs this rank issued
};

struct BackendContext {
  const WorkerConfig* config = nullptr;
  const StepSchedule* schedule = nullptr;
  int global_rank = 0;
  int local_rank = 0;
  // Rendezvous: NCCL unique ids (GPU) or Gloo's store (CPU) go through it.
  // Keys a backend writes must start with "<backend>/" to stay apart.
  TcpStoreClient* store = nullptr;
  std::chrono::milliseconds timeout{300'000};
};

using NamedBuffers = std::vector<std::pair<std::string, std::vector<std::byte>>>;

class StepBackend {
 public:
  virtual ~StepBackend() = default;

  virtual const char* name() const = 0;  // "cpu" or "gpu"

  // Refuses a plan this backend cannot run on any hardware (InvalidArgument
  // naming the fix), before Initialize and before the rendezvous: the
  // runner asks first, so a node fails fast with exit 2 and no peer waits
  // on it. Needs no device, no peer and no memory.
  virtual Status CheckPlan(const WorkerConfig&) const { return Status::Ok(); }

  // Allocates weights, gradients, optimizer state and activation buffers as
  // the plan's memory model predicts (sharded by ZeRO stage), initialises the
  // weights deterministically from the seed, and connects the tensor-, data-
  // and pipeline-parallel communicators of this rank.
  virtual Status Initialize(const BackendContext& context, uint64_t seed) = 0;

  // One optimizer step: the pipeline order of forward / recompute / backward
  // passes over the micro-batches (with their tensor-parallel collectives and
  // point-to-point sends), the data-parallel collectives, then the optimizer
  // update of this rank's shard.
  virtual StatusOr<StepTiming> RunStep(int64_t step) = 0;

  // Highest memory this rank has used (device memory on GPU, the tracked
  // buffers on CPU), bytes.
  virtual double PeakMemoryBytes() const = 0;

  // The buffers a checkpoint stores on request (weights and optimizer state
  // of this rank's shard), and restoring them.
  virtual StatusOr<NamedBuffers> SaveBuffers() = 0;
  virtual Status LoadBuffers(const NamedBuffers& buffers) = 0;
  // The bytes SaveBuffers returns, known after Initialize without copying
  // anything off the device.
  virtual uint64_t CheckpointBufferBytes() const = 0;

  // The GEMM precision this backend runs a plan of `planned` precision in:
  // what the worker's metrics and logs report, never the plan's wish.
  virtual planner::Precision ExecutedPrecision(planner::Precision planned) const { return planned; }
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_STEP_BACKEND_H_
